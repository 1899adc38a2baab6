"""Teams, their members, and the Kubernetes namespace each team gets."""
