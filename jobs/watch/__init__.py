"""What the cluster shows about jobs, brought back: the status watcher (`watcher`), what it
keeps of each object (`cache`), and a job's pods and logs (`logs`); the lifecycle's words for
what it sees are `jobs.status` (pure, the reconcile's too)."""
