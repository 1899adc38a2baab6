"""A team's queue on a flavor as its scheduler sees it: which waiting jobs may ever start,
in which order they are considered, and how many are ahead of one.

Kueue's ClusterQueues are BestEffortFIFO (`workloads.kueue`): workloads are considered by
priority, then by creation, and one that does not fit is set aside without blocking those
behind it; one that can never fit (more than the team can ever use) is only ever set aside.
Volcano orders its queue's jobs the same way. So a job that can never start is nobody's
"ahead", and is not queued demand (`jobs.use.usage`): only the jobs that may start count.
"""

from django.db.models import F, Q, QuerySet
from django.db.models.functions import Coalesce

from quotas.models import Quota

from ..gpus import FITS_A_NODE, START_GPUS
from ..lifecycle import AT_PERSONAL_CAP, NEVER_STARTS_REASONS, WAITING_FOR_QUOTA, State

# Waiting, and not known never to start: the scheduler has not said so (ExceedsQuota) and a
# worker fits a node. What the team's ceiling says is checked against START_GPUS. A job held
# back at its submitter's cap (`jobs.queue.caps`) is in no scheduler's queue: not ahead of anyone.
MAY_START = (Q(state__in=WAITING_FOR_QUOTA) & ~Q(reason__in=sorted(NEVER_STARTS_REASONS))
             & FITS_A_NODE
             & ~Q(state=State.SUBMITTED, reason=AT_PERSONAL_CAP))


def ceiling_of(team, flavor) -> int:
    """The most GPUs ``team`` can use on ``flavor``, borrowing included; 0 without a quota."""
    quota = Quota.objects.filter(team=team, flavor=flavor).with_cohort_lendable().first()
    return quota.ceiling_gpus if quota else 0


def _priority(job) -> int:
    # Kueue gives workloads without a priority class the value 0.
    return job.priority.value if job.priority_id else 0


class QueueingQuerySet(QuerySet):
    def may_start(self, ceiling: int):
        """Waiting jobs that may start some day under a ceiling of ``ceiling`` GPUs."""
        return self.filter(MAY_START).alias(start=START_GPUS).filter(start__lte=ceiling)

    def queue_of(self, team, flavor, ceiling: int):
        """The team's waiting jobs on ``flavor`` that may start, in the order the scheduler
        considers them: higher priority first, then the earlier created."""
        return (self.filter(team=team, flavor=flavor).may_start(ceiling)
                .alias(pv=Coalesce(F("priority__value"), 0)).order_by("-pv", "created_at", "pk"))

    def ahead(self, job):
        """Of a queue (``queue_of``), the jobs considered before ``job``: a new job (no pk) has
        everything at its priority or above ahead of it."""
        priority = _priority(job)
        if job.pk is None:
            return self.filter(pv__gte=priority)
        return self.exclude(pk=job.pk).filter(
            Q(pv__gt=priority) | Q(pv=priority, created_at__lt=job.created_at)
            | Q(pv=priority, created_at=job.created_at, pk__lt=job.pk))

    def ahead_of(self, job, ceiling: int | None = None) -> int | None:
        """How many jobs the scheduler considers before ``job`` that may start; None when
        ``job`` itself needs more than its team can ever use (``ceiling``: read if not given)."""
        ceiling = ceiling_of(job.team, job.flavor) if ceiling is None else ceiling
        if job.gpus_to_start > ceiling:
            return None
        return self.queue_of(job.team, job.flavor, ceiling).ahead(job).count()

    def start_sizes_ahead(self, job, ceiling: int) -> list[int]:
        """GPUs each job ahead of ``job`` needs to start, in the scheduler's order."""
        return list(self.queue_of(job.team, job.flavor, ceiling).ahead(job)
                    .annotate(size=START_GPUS).values_list("size", flat=True))
