"""Per-person caps inside a team (`quotas.models.MemberCap`, docs/caps.md): what one person's
jobs hold of a flavor, whether a job fits under its submitter's cap, and letting go the jobs
that waited for it.

What a person holds is every job of theirs the platform has let onto the cluster and that has
not finished: created (queued in Kueue or Volcano), admitted, running, preempted, cancelling,
each at its full size (`Job.total_gpus`: every worker, an inference server's most replicas).
Counting only admitted jobs would not hold the cap: a scheduler admits any workload it holds
as soon as the team's quota allows, so a person with ten created jobs would get all ten the
moment GPUs free up, and a queued workload already takes its place in the team's queue ahead
of teammates' later jobs. So a job over the cap is never admitted: it stays submitted with the
reason ``AT_PERSONAL_CAP`` (on the cluster behind the platform's Kueue admission gate where its
kind carries one, `workloads.gates`; not created elsewhere) and is let go (`release_at_cap`)
when it fits, by the on-commit trigger of a job's end (`jobs.receivers`), a cap's change
(`jobs.actions.caps_changed`), or the sweep's reconcile of the waiting job itself, which takes
its gate off.

Every decision is taken with the team's row locked (as ``MAX_LIVE_JOBS_PER_TEAM`` is in
`Job.objects.submit`), and the count read in a statement after the lock, so two submissions or
releases at once cannot both take the person's last GPUs.
"""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from quotas.models import MemberCap
from tenants.models import Team

from ..gpus import TOTAL_GPUS
from ..lifecycle import AT_PERSONAL_CAP, FINAL_STATE_VALUES, State

WAITING_AT_CAP = Q(state=State.SUBMITTED, reason=AT_PERSONAL_CAP)
# Let onto the cluster (or about to be) and not finished: what a person holds.
HOLDS = ~Q(state__in=[*FINAL_STATE_VALUES, State.DRAFT]) & ~WAITING_AT_CAP
RELEASED = {"reason": "Submitted", "message": "Under your cap now: waiting for the cluster."}


def lock_team(team_id: int) -> None:
    """Lock the team's row until the transaction ends: every cap decision of the team (and the
    team's count of live jobs) waits for the one before it. The counts that follow are
    statements of their own, so they see what the lock's holder committed."""
    Team.objects.select_for_update().filter(pk=team_id).values_list("pk").first()


def over_cap(cap: MemberCap | None, held_gpus: int, held_jobs: int, job) -> str | None:
    """Why ``job`` must wait for its submitter's other jobs, who holds ``held_gpus`` GPUs in
    ``held_jobs`` jobs; None when it fits (or there is no cap)."""
    if cap is None:
        return None
    flavor, need = job.flavor.name, job.total_gpus
    if held_gpus + need > cap.max_gpus:
        return (f"You hold {held_gpus} of your {cap.max_gpus} {flavor} GPUs in team {job.team.slug}; this job "
                f"needs {need}. It starts by itself when enough of your other {flavor} jobs end.")
    if cap.max_jobs is not None and held_jobs + 1 > cap.max_jobs:
        return (f"You have {held_jobs} of your {cap.max_jobs} {flavor} jobs on the cluster in team "
                f"{job.team.slug}. This one starts by itself when one of them ends.")
    return None


def never_fits(cap: MemberCap | None, job) -> dict[str, str]:
    """A field error when ``job`` alone needs more than its submitter's cap: it would wait for ever."""
    if cap is None or job.total_gpus <= cap.max_gpus:
        return {}
    shape = job.work_kind.shape
    field = shape.most if shape.most != "workers" else "gpus_per_worker"
    whose = "your cap" if not cap.is_default else "the team's cap for each person"
    return {field: (f"This job needs {job.total_gpus} {job.flavor.name} GPUs at once, more than {whose} of "
                    f"{cap.max_gpus} in team {job.team.slug}. Make it smaller, or ask an owner of the team "
                    "to raise the cap.")}


class CapQuerySet(QuerySet):
    def holding(self, team_id: int, user_id: int, flavor_id: int):
        """The person's jobs of the team on the flavor that count against their cap."""
        return self.filter(team_id=team_id, submitter_id=user_id, flavor_id=flavor_id).filter(HOLDS)

    def held_by(self, team_id: int, user_id: int, flavor_id: int) -> tuple[int, int]:
        """GPUs and jobs the person holds on the flavor in the team (`holding`)."""
        totals = self.holding(team_id, user_id, flavor_id).order_by().aggregate(gpus=Sum(TOTAL_GPUS), jobs=Count("pk"))
        return totals["gpus"] or 0, totals["jobs"]

    def at_cap(self):
        return self.filter(WAITING_AT_CAP)

    def cap_verdict(self, job) -> dict[str, str] | None:
        """With the team locked (`lock_team`): the reason and message a new submission of ``job``
        waits with, None when it may go to the cluster now. Raises a field error when it could
        never fit."""
        cap = MemberCap.objects.for_person(job.team, job.submitter, job.flavor)
        if cap is None:
            return None
        if errors := never_fits(cap, job):
            raise ValidationError(errors, code="over_personal_cap")
        why = over_cap(cap, *self.held_by(job.team_id, job.submitter_id, job.flavor_id), job)
        return {"reason": AT_PERSONAL_CAP, "message": why} if why else None

    def release_at_cap(self, team_id: int, user_id: int, flavor_id: int) -> list[int]:
        """Let go the person's jobs waiting at their cap on the flavor that fit under it now, in
        the order the scheduler would consider them (priority, then the earlier submitted); one
        that does not fit does not hold back a smaller one behind it (Kueue's BestEffortFIFO).
        Those still waiting get their message brought up to date. Returns the ids let go."""
        released: list[int] = []
        with transaction.atomic():
            lock_team(team_id)
            waiting = list(self.at_cap().filter(team_id=team_id, submitter_id=user_id, flavor_id=flavor_id)
                           .select_related("team", "flavor", "submitter")
                           .alias(pv=Coalesce(F("priority__value"), 0)).order_by("-pv", "created_at", "pk"))
            if not waiting:
                return released
            cap = MemberCap.objects.for_person(waiting[0].team, waiting[0].submitter, waiting[0].flavor)
            gpus, jobs = self.held_by(team_id, user_id, flavor_id)
            now, still_waiting = timezone.now(), []
            for job in waiting:
                if over_cap(cap, gpus, jobs, job) is None and self.filter(pk=job.pk).filter(WAITING_AT_CAP).update(
                        **RELEASED, updated_at=now):
                    job.reason, job.message = RELEASED["reason"], RELEASED["message"]
                    job.note("UnderPersonalCap", "Your other jobs made room under your cap: sent to the cluster.")
                    released.append(job.pk)
                    gpus, jobs = gpus + job.total_gpus, jobs + 1
                else:
                    still_waiting.append(job)
            for job in still_waiting:  # what they wait for, as it is now
                why = over_cap(cap, gpus, jobs, job)
                if why and why != job.message:
                    self.filter(pk=job.pk).filter(WAITING_AT_CAP).update(message=why, updated_at=now)
        return released

    def cap_holdings(self, team_id: int) -> dict[tuple[int, int], dict[str, int]]:
        """Per (person, flavor) of the team: GPUs and jobs held, and jobs waiting at a cap
        (one query, for the team page and the API)."""
        rows = (self.filter(team_id=team_id, submitter__isnull=False)
                .exclude(state__in=[*FINAL_STATE_VALUES, State.DRAFT]).order_by()
                .values("submitter_id", "flavor_id")
                .annotate(gpus=Sum(TOTAL_GPUS, filter=HOLDS), jobs=Count("pk", filter=HOLDS),
                          waiting=Count("pk", filter=WAITING_AT_CAP)))
        return {(r["submitter_id"], r["flavor_id"]): {"gpus": r["gpus"] or 0, "jobs": r["jobs"],
                                                      "waiting": r["waiting"]} for r in rows}

    def waiting_people(self, team_id: int) -> list[tuple[int, int]]:
        """(person, flavor) of every job of the team waiting at a cap."""
        return list(self.at_cap().filter(team_id=team_id).order_by()
                    .values_list("submitter_id", "flavor_id").distinct())
