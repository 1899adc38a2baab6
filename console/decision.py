"""What approving a quota request would change, for the manager deciding it: the team's
usage on the flavor now, the cluster's commitment on that flavor before and after
("24 of 32 promised -> 32 of 32"), and which of the team's waiting jobs the new quota
would let start.

Asked, never re-derived: the quota after approval is ``quotas.grants.effective`` over the
team's grants plus the one approval would add (with the standing grant
``QuotaGrant.objects.add`` would write first), what the team uses is ``jobs.use.usage``, the
cluster's GPUs are the capacity page's count (``console.capacity.cluster_gpus``) and
"promised" is what that page calls it: the sum of the nominal quotas on the flavor.
"""

from copy import copy
from dataclasses import dataclass, field
from datetime import date

from django.db.models import F, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs.lifecycle import WAITING_FOR_QUOTA
from jobs.models import Job
from jobs.use.usage import Usage, usage_of
from quotas.grants import effective, window
from quotas.models import Quota, QuotaGrant, QuotaRequest

from .capacity import cluster_gpus

RUNNABLE_SHOWN = 10  # jobs named on the page; the rest are counted


@dataclass
class Effect:
    usage: Usage
    gpus: int  # the change looked at (the request's, or what the manager typed)
    starts_on: date
    nominal_after: int
    ceiling_after: int
    promised_before: int
    promised_after: int
    cluster: int | None
    cluster_note: str
    runnable: list = field(default_factory=list)  # waiting jobs that fit only after approval
    runnable_more: int = 0
    already_fit: int = 0  # waiting jobs that fit the quota the team has (they wait on the scheduler)
    still_waiting: int = 0  # waiting jobs that do not fit even after approval
    waiting_jobs: int = 0  # the team's jobs waiting on the flavor, whatever they need
    waiting_gpus: int = 0

    @property
    def starts_later(self) -> bool:
        return self.starts_on > timezone.localdate()

    @property
    def over_committed_by(self) -> int:
        """GPUs promised beyond the cluster's after approval (0 when they fit or it is unknown)."""
        return 0 if self.cluster is None else max(0, self.promised_after - self.cluster)

    @property
    def above_quota_after(self) -> int:
        """GPUs the team's admitted jobs hold beyond the quota approval would leave."""
        return max(0, self.usage.in_use - self.nominal_after)


def _quota_after(quota_request: QuotaRequest, quota: Quota | None, gpus: int, borrowing_limit: int | None,
                 starts_on: date, ends_on: date | None) -> tuple[int, int]:
    """The team's nominal GPUs and ceiling on the flavor once the grant has started."""
    starts_at, ends_at = window(starts_on, ends_on)
    grants = list(QuotaGrant.objects.filter(team=quota_request.team, flavor=quota_request.flavor))
    if not grants and quota is not None:  # the standing grant the first grant is preceded by
        grants.append(QuotaGrant(gpus=quota.nominal_gpus, borrowing_limit_gpus=quota.borrowing_limit_gpus,
                                 starts_at=min(starts_at, timezone.now())))
    grants.append(QuotaGrant(gpus=gpus, borrowing_limit_gpus=borrowing_limit, starts_at=starts_at, ends_at=ends_at))
    after = effective(grants, max(starts_at, timezone.now()))
    if quota is None:
        return after.gpus, after.gpus
    changed = copy(quota)
    changed.nominal_gpus = after.gpus
    changed.borrowing_limit_gpus = after.borrowing_limit_gpus if quota.cohort_id else None
    return after.gpus, changed.ceiling_gpus


def _queue(team, flavor):
    """The team's waiting jobs on the flavor in the order the scheduler takes them: higher
    priority first, then the earlier created (``jobs.queue.queueing``'s order). All of them, not
    ``queue_of``'s "may start" ones: a job too big for today's quota (ExceedsQuota) is
    exactly what an approval may let start."""
    return (Job.objects.filter(team=team, flavor=flavor, state__in=WAITING_FOR_QUOTA)
            .alias(pv=Coalesce(F("priority__value"), 0)).order_by("-pv", "created_at", "pk"))


def _fitting(jobs, free: int, gpus_per_node: int) -> set[int]:
    """The jobs that start, in queue order, in ``free`` guaranteed GPUs: each that fits
    (``job.gpus_to_start``) takes them; one that does not fit waits, and smaller ones behind
    it may still start (BestEffortFIFO)."""
    started = set()
    for job in jobs:
        if job.gpus_per_worker <= gpus_per_node and job.gpus_to_start <= free:
            started.add(job.pk)
            free -= job.gpus_to_start
    return started


NUMBERS = ("gpus", "borrowing_limit_gpus", "starts_on", "ends_on")


def effect_of(quota_request: QuotaRequest, numbers: dict | None = None) -> Effect:
    """The effect of approving ``quota_request`` with its own numbers, or with those of
    ``numbers`` it has (the approval form's, as typed)."""
    team, flavor = quota_request.team, quota_request.flavor
    asked = {name: getattr(quota_request, name) for name in NUMBERS}
    asked.update({name: value for name, value in (numbers or {}).items() if name in NUMBERS})
    gpus, starts_on = asked["gpus"], asked["starts_on"]
    usage = usage_of(team, flavor)
    nominal_after, ceiling_after = _quota_after(quota_request, usage.quota, gpus, asked["borrowing_limit_gpus"],
                                                starts_on, asked["ends_on"])
    promised = Quota.objects.filter(flavor=flavor).aggregate(total=Coalesce(Sum("nominal_gpus"), 0))["total"]
    counts, note = cluster_gpus([flavor])
    waiting = list(_queue(team, flavor).select_related("priority"))
    before = _fitting(waiting, usage.nominal - usage.in_use, flavor.gpus_per_node)
    after = _fitting(waiting, nominal_after - usage.in_use, flavor.gpus_per_node)
    runnable = [job for job in waiting if job.pk in after and job.pk not in before]
    return Effect(
        usage=usage, gpus=gpus, starts_on=starts_on, nominal_after=nominal_after, ceiling_after=ceiling_after,
        promised_before=promised, promised_after=promised - usage.nominal + nominal_after,
        cluster=counts.get(flavor.pk), cluster_note=note, runnable=runnable[:RUNNABLE_SHOWN],
        runnable_more=max(0, len(runnable) - RUNNABLE_SHOWN), already_fit=len(before),
        still_waiting=sum(1 for job in waiting if job.pk not in after and job.pk not in before),
        waiting_jobs=len(waiting), waiting_gpus=sum(job.gpus_to_start for job in waiting),
    )
