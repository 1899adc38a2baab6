"""Whose words are whose in ``gpuctl status``: Kueue's own reason and message for a job it has
not admitted come first, verbatim, then what GPU Platform adds (its reading, its count of the
jobs ahead, its estimate); the API keeps them apart (docs/api.md)."""


def status_lines(job: dict) -> list[str]:
    """The state line, and for a job Kueue has not admitted, Kueue's words before the platform's."""
    ours = f"{job['reason']}: {job['message']}" if job.get("reason") else ""
    if not job.get("kueue_reason"):
        return [f"state: {job['state']}" + (f"  {ours}" if ours else "")]
    kueue = job["kueue_reason"] + (f": {job['kueue_message']}" if job.get("kueue_message") else "")
    lines = [f"state: {job['state']}", f"  Kueue says: {kueue}"]
    place = job.get("queue") or {}
    if place.get("kueue_position") is not None:
        lines.append(f"  Kueue's pending list: {place['kueue_position']} workload(s) before it in its ClusterQueue")
    if ours:
        lines.append(f"  GPU Platform: {ours}")
    if place:
        lines.append(f"  GPU Platform counts {place['jobs_ahead']} job(s) ahead that can start")
    return lines
