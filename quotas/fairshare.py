"""Fair share explained: why one team's jobs go before another's when both wait for a cohort's
spare GPUs, in plain words, from Kueue's own numbers.

Kueue's fair sharing (enabled in its Configuration: `fairSharing: {preemptionStrategies: ...}`;
deploy/local-cluster/config/kueue-config.yaml) orders the ClusterQueues of a cohort by their
`status.fairSharing.weightedShare`: of every resource, what the queue uses above its nominal
quota, per mille of what the cohort can lend, the largest of these divided by the queue's
`spec.fairSharing.weight` (0 when it borrows nothing). The lowest share is admitted first and
the highest is preempted first to give borrowed GPUs back. A ClusterQueue without
`status.fairSharing` means Kueue runs without fair sharing: spare GPUs go first come, first
served, and weights do nothing.

The share is Kueue's view of now; Kueue keeps no history across ClusterQueues (admission fair
sharing's decayed usage orders the LocalQueues inside one ClusterQueue, and each team has
its own ClusterQueue per flavor, so it has nothing to order here). Our cohorts have no parent,
so a Cohort's own weightedShare is always 0 (Kueue computes it against a parent) and is not
shown.

`sentence` is pure (tested from given statuses); `fair_shares` lists our ClusterQueues through
the door (one LIST a page, as the capacity page lists Nodes: the web's identity may list
ClusterQueues, gpuplatform/rbac.py, and keeps no watch cache).
"""

from dataclasses import dataclass
from decimal import Decimal

from cluster import ClusterError
from cluster.quantity import parse
from core.ownership import TEAM_LABEL, selector
from core.reconcile import NoCluster, current_cluster
from workloads.kueue import API, KUEUE

from .models import Quota

CLUSTER_QUEUE = (API, "ClusterQueue")


@dataclass(frozen=True)
class Member:
    """One ClusterQueue of a cohort as Kueue shows it: its team, weight, weighted share (None:
    Kueue gives none, fair sharing is off) and the GPUs it borrows beyond its nominal quota."""

    team: str
    weight: Decimal
    share: int | None
    borrowed_gpus: int = 0
    nominal_gpus: int = 0


def member_of(cluster_queue: dict, resource_name: str) -> Member | None:
    """A Member from a ClusterQueue object (None when it is not one of a team's)."""
    team = ((cluster_queue.get("metadata") or {}).get("labels") or {}).get(TEAM_LABEL)
    if not team:
        return None
    spec, status = cluster_queue.get("spec") or {}, cluster_queue.get("status") or {}
    weight = parse((spec.get("fairSharing") or {}).get("weight", "1"))[0]
    fair = status.get("fairSharing")
    share = None if fair is None else int(fair.get("weightedShare") or 0)
    nominal = borrowed = 0
    for group in spec.get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for resource in flavor.get("resources") or ():
                if resource.get("name") == resource_name:
                    nominal += int(parse(resource.get("nominalQuota", "0"))[0])
    for flavor in status.get("flavorsUsage") or ():
        for resource in flavor.get("resources") or ():
            if resource.get("name") == resource_name:
                borrowed += int(parse(resource.get("borrowed", "0"))[0])
    return Member(team, weight, share, borrowed, nominal)


def _weight(value: Decimal) -> str:
    return f"{value.normalize():f}"


def _gpus(count: int) -> str:
    return f"{count} GPU{'' if count == 1 else 's'}"


def _compare(mine: int, theirs: int) -> str:
    if mine == theirs:
        return "the same as"
    if theirs == 0:
        return "more than"
    if mine < theirs:
        return f"{round(100 * (theirs - mine) / theirs)} % less than"
    return f"{round(100 * (mine - theirs) / theirs)} % more than"


def sentence(team: str, members: list[Member], cohort: str, flavor: str, named=lambda slug: True) -> str:
    """Why ``team``'s jobs on ``flavor`` go before or after the other teams' of ``cohort`` when
    they wait together, from Kueue's numbers (``members``: every ClusterQueue of the cohort on
    that flavor). ``named(slug)`` says whether the reader may see a team's name; the others
    are "another team"."""
    me = next((m for m in members if m.team == team), None)
    if me is None:
        return f"Kueue shows no queue of team {team} on {flavor} yet."
    others = [m for m in members if m.team != team]
    if me.share is None:
        return (f"Kueue's fair sharing is off on this cluster: the spare {flavor} GPUs of cohort {cohort} go to "
                "whoever asks first, and weights are not used.")
    if not others:
        return f"Team {team} is the only team of cohort {cohort} on {flavor}: it shares spare GPUs with no one."

    def who(m: Member) -> str:
        return f"team {m.team}" if named(m.team) else "another team"

    head = _head(me, flavor)
    if all(m.share == 0 for m in others) and me.share == 0:
        return f"{head}. No team of cohort {cohort} borrows now, so spare GPUs go to whoever asks first."
    ordered = sorted(others, key=lambda m: (m.share if m.share is not None else 0, m.team))
    parts = [f"{_compare(me.share, m.share or 0)} {who(m)}'s {m.share or 0} (weight {_weight(m.weight)})"
             for m in ordered]
    before = [who(m) for m in ordered if (m.share or 0) > me.share]
    after = [who(m) for m in ordered if (m.share or 0) < me.share]
    ties = [who(m) for m in ordered if (m.share or 0) == me.share]
    return f"{head}; that is {_join(parts)}, {_order(me, before, after, ties)}."


def _head(me: Member, flavor: str) -> str:
    """The team's weight and what it borrows: the numbers its place in the order comes from."""
    head = f"Team {me.team} has weight {_weight(me.weight)}"
    if me.share == 0:
        return head + (f" and uses no more than its own quota of {_gpus(me.nominal_gpus)} on {flavor} "
                       "(Kueue's weighted share: 0)")
    return head + (f" and borrows {_gpus(me.borrowed_gpus)} of {flavor} beyond its quota of {me.nominal_gpus}: "
                   f"Kueue's weighted share {me.share} (the cohort's spare GPUs it uses, per mille, divided by its "
                   "weight)")


def _order(me: Member, before: list[str], after: list[str], ties: list[str]) -> str:
    """Who goes first: the teams with a larger share (`before` the team's jobs) wait for it."""
    if before and after:
        order = f"so when they all wait its jobs go after {_join(after)}'s and before {_join(before)}'s"
    elif before:
        order = f"so its jobs go first when it and {_join(before)} both wait"
    elif after:
        order = f"so {_join(after)} go{'es' if len(after) == 1 else ''} first when both wait"
        if not ties and me.share:
            order += f", and team {me.team}'s borrowed GPUs are the first taken back"
    else:
        order = "so neither goes first by share"
    if ties and (before or after):
        order += f"; it ties with {_join(ties)}"
    return order


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


@dataclass(frozen=True)
class FairShare:
    """What the team page and the console show for one quota in a cohort."""

    team: str
    flavor: str
    cohort: str
    members: tuple[Member, ...]
    text: str


def fair_shares(teams, named=lambda slug: True, cluster=None) -> tuple[list[FairShare], str]:
    """The fair-share sentence of each Kueue quota of ``teams`` that sits in a cohort, and a
    problem in words when Kueue could not be asked ("" when it could)."""
    quotas = list(Quota.objects.filter(team__in=teams, cohort__isnull=False, flavor__scheduler=KUEUE.name)
                  .select_related("team", "flavor", "cohort").order_by("team__slug", "flavor__name"))
    if not quotas:
        return [], ""
    try:
        cluster = cluster or current_cluster()
        queues = cluster.list(*CLUSTER_QUEUE, label_selector=selector())
    except NoCluster:
        return [], "No cluster is configured, so Kueue's fair-sharing status cannot be read."
    except ClusterError as err:
        return [], f"Kueue's fair-sharing status could not be read: {err}"
    found = []
    for quota in quotas:
        cohort, flavor = quota.cohort.name, quota.flavor
        members = tuple(m for q in queues if (q.get("spec") or {}).get("cohortName") == cohort
                        and _covers(q, flavor.name) and (m := member_of(q, flavor.resource_name)))
        found.append(FairShare(quota.team.slug, flavor.name, cohort, members,
                               sentence(quota.team.slug, list(members), cohort, flavor.name, named)))
    return found, ""


def _covers(cluster_queue: dict, flavor: str) -> bool:
    return any(f.get("name") == flavor for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or ()
               for f in group.get("flavors") or ())
