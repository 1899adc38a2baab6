"""The labels that mark objects as ours; the one place they are added.

Prune and watch select by these labels, so every rendered object goes through ``owned``.
"""

from cluster import MANAGED_BY_LABEL, MANAGED_BY_VALUE

TEAM_LABEL = "gpuplatform.io/team"
JOB_LABEL = "gpuplatform.io/job"
# The ServiceAccount every workload runs as: created with each team namespace (tenants),
# named in every pod template (schedulers).
WORKLOAD_SERVICE_ACCOUNT = "workload"


def ownership_labels(*, team: str | None = None, job: int | None = None) -> dict[str, str]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    if team:
        labels[TEAM_LABEL] = team
    if job is not None:
        labels[JOB_LABEL] = str(job)
    return labels


def owned(obj: dict, *, team: str | None = None, job: int | None = None) -> dict:
    """Return ``obj`` with our labels merged into ``metadata.labels`` (ours win)."""
    metadata = obj.setdefault("metadata", {})
    metadata["labels"] = {**metadata.get("labels", {}), **ownership_labels(team=team, job=job)}
    return obj


def selector(*, team: str | None = None, job: int | None = None) -> str:
    """A label selector matching what ``owned`` marks with the same arguments."""
    return ",".join(f"{k}={v}" for k, v in ownership_labels(team=team, job=job).items())


def cluster_wide_selector() -> str:
    """Our objects that belong to no team: flavors, cohorts, priorities."""
    return f"{selector()},!{TEAM_LABEL}"


def team_selector(team: str) -> str:
    """A team's own objects, not those of its jobs."""
    return f"{selector(team=team)},!{JOB_LABEL}"


def job_selector(job: int) -> str:
    return f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{JOB_LABEL}={job}"
