"""The platform end to end on the local Kubernetes cluster (deploy/local-cluster): Kueue,
Volcano, the operators, Prometheus and KEDA, driven as the worker and watcher drive them."""
