"""What jobs use: a team's usage, borrowing and waiting per flavor (`usage`), what the GPUs do
by Prometheus (`telemetry`), when they are idle (`idle`), used and idle GPU-hours (`gpu_use`),
and idle-GPU reclaim (`reclaim`)."""
