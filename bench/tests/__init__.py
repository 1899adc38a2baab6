"""Tests of the benchmarks' and the soak's own harness, without a cluster: the rows the soak
counts (bench/soak/checks.py, timeline.py), the scenes it plans (plan.py), and the ETA
benchmark's reference estimators (bench/eta.py). They run in the unit shard (pyproject's
testpaths); the platform's tests (tests/) never import bench/."""
