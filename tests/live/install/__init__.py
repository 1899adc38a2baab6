"""The Helm chart rendered by real Helm, and installed on the local cluster."""
