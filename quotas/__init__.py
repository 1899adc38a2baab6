"""GPU flavors, cohorts, per-team quotas and priority classes, and their Kueue/Volcano objects."""
