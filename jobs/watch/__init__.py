"""What the cluster shows about jobs, brought back: the status watcher (`watcher`), what it
keeps of each object (`cache`), the lifecycle's words for what it sees (`status`), and a job's
pods and logs (`logs`)."""
