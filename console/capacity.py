"""Capacity at a glance: per flavor, cohort and team, what the cluster has, what is
promised (the sum of nominal quotas), in use, borrowed and waiting.

Cluster GPUs come from the nodes matching each flavor's node labels (one LIST of Nodes);
without a configured or reachable cluster the page says so and shows the rest. When idle
reclaim is paused (metrics missing or stale, or no sweep lately), the page says why: the
last sweep's word, from the shared cache (``jobs.use.reclaim.paused``).
"""

from collections import defaultdict
from dataclasses import dataclass, field

from cluster import ClusterError
from core.reconcile import NoCluster, current_cluster
from jobs.use import reclaim
from jobs.use.usage import JobGpus, job_gpus
from quotas.models import GpuFlavor, Quota
from quotas.models.hardware import node_gpus, selects_node


@dataclass
class Line:
    """One row of the capacity tables: a flavor, a cohort on a flavor, or a team's quota
    (``quota_id``); a cohort line names its teams."""

    label: str
    flavor: GpuFlavor
    nominal: int = 0
    in_use: int = 0
    borrowed: int = 0
    queued: int = 0
    cluster: int | None = None
    quota_id: int | None = None
    teams: list = field(default_factory=list)

    @property
    def commitment(self) -> str:
        if self.cluster is None:
            return "unknown"
        if self.nominal > self.cluster:
            return "over"
        return "under" if self.nominal < self.cluster else "exact"

    @property
    def commitment_text(self) -> str:
        if self.cluster is None:
            return "cluster size unknown"
        gap = self.nominal - self.cluster
        if gap > 0:
            return f"over-committed by {gap}"
        return f"{-gap} not promised" if gap < 0 else "exactly committed"

    def bar(self) -> dict:
        """Percent positions for the SVG bar: nominal, in use, queued after it, cluster mark."""
        scale = max(self.cluster or 0, self.nominal, self.in_use + self.queued, 1)
        pct = lambda n: round(100 * n / scale, 2)  # noqa: E731
        return {"nominal": pct(self.nominal), "used": pct(self.in_use), "queued_x": pct(self.in_use),
                "queued": pct(self.queued), "cluster": None if self.cluster is None else pct(self.cluster)}


def cluster_gpus(flavors) -> tuple[dict[int, int], str]:
    """GPUs per flavor id from the nodes, and a sentence when they could not be counted."""
    try:
        nodes = current_cluster().list("v1", "Node")
    except NoCluster as err:
        return {}, str(err)
    except ClusterError as err:
        return {}, f"The cluster could not be reached: {err}"
    counts = {flavor.pk: sum(node_gpus(flavor, node) for node in nodes if selects_node(flavor, node))
              for flavor in flavors}
    return counts, ""


def overview() -> dict:
    """Lines per flavor, per cohort and flavor, and per team quota; plus a note on the
    cluster's size and why idle reclaim is paused, if it is. Four queries and at most one LIST of Nodes, whatever the number of
    teams: quotas are read as plain values, no model per row (`job_gpus` reads the teams'
    ceilings, which tell the waiting jobs that may start from those that never will)."""
    flavors = list(GpuFlavor.objects.all())
    flavor_by_pk = {f.pk: f for f in flavors}
    quotas = (Quota.objects.order_by("flavor__name", "team__slug")
              .values_list("pk", "team_id", "team__slug", "flavor_id", "cohort__name", "nominal_gpus"))
    jobs = job_gpus()
    counts, note = cluster_gpus(flavors)
    by_flavor = {f.pk: Line(f.display_name or f.name, f, cluster=counts.get(f.pk)) for f in flavors}
    by_cohort: dict = {}
    teams = []
    quota_keys = set()
    for quota_id, team_id, slug, flavor_id, cohort, nominal in quotas:
        gpus = jobs.get((team_id, flavor_id), JobGpus())
        in_use, queued = gpus.in_use, gpus.waiting
        quota_keys.add((team_id, flavor_id))
        flavor = flavor_by_pk[flavor_id]
        line = Line(slug, flavor, nominal=nominal, in_use=in_use, borrowed=max(0, in_use - nominal),
                    queued=queued, quota_id=quota_id)
        teams.append(line)
        targets = [by_flavor[flavor_id]]
        if cohort is not None:
            targets.append(by_cohort.setdefault((cohort, flavor_id), Line(cohort, flavor)))
        for target in targets:
            target.nominal += line.nominal
            target.in_use += line.in_use
            target.borrowed += line.borrowed
            target.queued += line.queued
            target.teams.append(slug)
    # Jobs on a flavor where their team has no quota still use GPUs (they cannot wait for
    # any: without a quota they never start).
    for (team_id, flavor_id), gpus in jobs.items():
        if (team_id, flavor_id) not in quota_keys and flavor_id in by_flavor:
            by_flavor[flavor_id].in_use += gpus.in_use
    return {
        "flavors": list(by_flavor.values()),
        "cohorts": [by_cohort[k] for k in sorted(by_cohort, key=lambda k: (k[0], by_cohort[k].flavor.name))],
        "teams": teams,
        "cluster_note": note,
        "reclaim_paused": reclaim.paused(),
    }


def team_totals(teams: list[Line]) -> list[dict]:
    """Per team across flavors, for the summary table."""
    out: dict = defaultdict(lambda: {"nominal": 0, "in_use": 0, "borrowed": 0, "queued": 0})
    for line in teams:
        row = out[line.label]
        for key in ("nominal", "in_use", "borrowed", "queued"):
            row[key] += getattr(line, key)
    return [{"team": k, **v} for k, v in sorted(out.items())]
