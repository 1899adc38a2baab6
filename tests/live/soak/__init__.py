"""The short soak (`make soak` with SOAK_MINUTES=2) on a local cluster of its own."""
