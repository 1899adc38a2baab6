"""What a notebook may do, checked before it reaches the cluster (docs/notebooks.md). Mixed into
`jobs.models.Job` (its fields: kind, team, flavor, state, port, workers, max_runtime_seconds,
run_admitted_at).

A notebook is one pod (workers 1) on a Kueue flavor, listening on its port (8888 unless told).
It runs only within the team's own nominal quota, never on borrowed GPUs: at submission and at
every start it must fit in what the team's own quota on the flavor leaves free (its other jobs
holding quota counted), or it is refused with the numbers. It is stopped, not ended, by a
person, by its idle GPUs (`jobs.use.reclaim`) or by its lifetime (its max runtime, the flavor's
default and cap as for training), and started again with the same volumes.
"""

from datetime import timedelta

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q, Sum
from django.utils import timezone

from quotas.models import Quota
from tenants.models import Membership

from ..lifecycle import HOLDING_QUOTA, WAITING_FOR_QUOTA, State
from ..queue.queueing import START_GPUS

# States a notebook can be stopped from: anything holding or waiting for quota.
STOPPABLE = (*WAITING_FOR_QUOTA, *HOLDING_QUOTA)


class NotebookRules:
    @property
    def is_notebook(self) -> bool:
        """Stopped and started again rather than ended (`WorkKind.stoppable`)."""
        return self.work_kind.stoppable

    def nominal_room(self) -> tuple[int, int]:
        """(free, nominal): the GPUs of the team's own quota on the flavor that its other jobs
        holding quota (or giving it back) leave free, and the quota's nominal GPUs."""
        quota = Quota.objects.filter(team_id=self.team_id, flavor_id=self.flavor_id).only("nominal_gpus").first()
        nominal = quota.nominal_gpus if quota else 0
        others = type(self)._default_manager.filter(team_id=self.team_id, flavor_id=self.flavor_id).exclude(pk=self.pk)
        held = others.aggregate(
            holding=Sum(START_GPUS, filter=Q(state__in=HOLDING_QUOTA)),
            leaving=Sum("gpus_in_use", filter=Q(state=State.CANCELLING)))
        return max(nominal - (held["holding"] or 0) - (held["leaving"] or 0), 0), nominal

    def nominal_refusal(self) -> str:
        """Why the notebook cannot start within the team's own quota now ("" when it can)."""
        free, nominal = self.nominal_room()
        need = self.gpus_to_start
        if need <= free:
            return ""
        return (f"A notebook runs only within team {self.team.slug}'s own quota on {self.flavor.name}, never on "
                f"borrowed GPUs: {free} of its {nominal} GPUs are free and this one needs {need}. Stop a notebook "
                "or wait for a job to end, or ask for fewer GPUs.")

    # --- stop and start ---------------------------------------------------------------------------
    def _may_operate(self, user) -> bool:
        return self.team.role_of(user) in (Membership.Role.OWNER, Membership.Role.MEMBER)

    @property
    def is_stoppable(self) -> bool:
        return self.is_notebook and self.state in STOPPABLE

    def can_stop(self, user) -> bool:
        """Owners and members of the team, as for cancelling."""
        return self.is_stoppable and self._may_operate(user)

    def can_start(self, user) -> bool:
        return self.is_notebook and self.state == State.STOPPED and self._may_operate(user)

    def stop(self, *, reason: str, message: str, at=None) -> bool:
        """Scale the notebook to nothing and keep it (`jobs.actions.stop` reconciles it): a
        person's stop, its idle GPUs or its lifetime (``at``: when, now by default). Returns
        whether this call changed it."""
        for _ in range(3):  # the watcher may move the row on between our read and our write
            if not self.is_stoppable:
                return False
            if self.transition(State.STOPPED, reason=reason, message=message, at=at):
                return True
            self.refresh_from_db(fields=["state", "reason", "message", "updated_at", "gpus_in_use"])
        return False

    def request_stop(self, user) -> bool:
        if not self.can_stop(user):
            raise PermissionDenied("You cannot stop this job.")
        return self.stop(reason="StopRequested",
                         message=f"Stopped by {user.get_username()}: its GPUs went back, its volumes are kept.")

    def request_start(self, user) -> bool:
        """Queue a stopped notebook again, if it fits the team's own quota now (else a field
        error on its GPUs, as at submission)."""
        if not self.can_start(user):
            raise PermissionDenied("You cannot start this job.")
        if why := self.nominal_refusal():
            raise ValidationError({"gpus_per_worker": why}, code="over_nominal_quota")
        return self.transition(State.SUBMITTED, reason="StartRequested",
                               message=f"Started again by {user.get_username()}.")

    def lifetime_over(self, now=None) -> bool:
        """Whether the notebook has run its lifetime since it was last admitted."""
        if not (self.is_notebook and self.max_runtime_seconds and self.run_admitted_at) \
                or self.state not in HOLDING_QUOTA:
            return False
        return (now or timezone.now()) - self.run_admitted_at >= timedelta(seconds=self.max_runtime_seconds)
