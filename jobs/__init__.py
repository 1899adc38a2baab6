"""Training and inference workloads: their lifecycle, events and cluster objects."""
