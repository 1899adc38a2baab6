"""What a TrainJob (`workloads.kinds.train_job`) adds to a job: the runtime it runs on, held to
those quota managers let its team use (`quotas.TrainingRuntime`), and the progress its trainer
last published (Kubeflow Trainer's ``status.trainerStatus``), which its page, the API and the
ETAs of the jobs queued behind it read. Mixed into `jobs.models.Job`."""

from datetime import datetime, timedelta

from quotas.models import TrainingRuntime
from workloads import Progress


class TrainJobRules:
    def training_runtime_problem(self) -> str:
        """Why the job's runtime is not one its team may use ("" when it is), or is one the
        cluster sync found missing from the cluster (never checked refuses nothing)."""
        name = (self.training_runtime or "").strip()
        runtimes = {runtime.name: runtime for runtime in TrainingRuntime.objects.for_team(self.team)} \
            if self.team_id else {}
        allowed = list(runtimes)
        if name and name in runtimes:
            return runtimes[name].missing_problem()  # one the cluster is known not to have
        offered = f"Your team may use: {', '.join(allowed)}." if allowed else \
            "Your team may use none yet: ask a quota manager to allow one."
        if not name:
            return f"A TrainJob needs the training runtime it runs on. {offered}"
        return f"Runtime {name!r} is not one your team may use. {offered}"

    def record_progress(self, progress: Progress | None) -> bool:
        """Keep what the trainer last said (its percent, remaining seconds and when it said so),
        written only when it changed. Whether it was written."""
        if progress is None:
            return False
        values = {"trainer_progress_percent": progress.percent, "trainer_remaining_seconds": progress.remaining_seconds,
                  "trainer_status_at": progress.updated_at}
        if all(getattr(self, name) == value for name, value in values.items()):
            return False
        type(self).objects.filter(pk=self.pk).update(**values)
        for name, value in values.items():
            setattr(self, name, value)
        return True

    @property
    def trainer_remaining(self) -> timedelta | None:
        """The remaining time its trainer last published, for the page's words."""
        return None if self.trainer_remaining_seconds is None else timedelta(seconds=self.trainer_remaining_seconds)

    @property
    def has_trainer_progress(self) -> bool:
        return self.trainer_progress_percent is not None or self.trainer_remaining_seconds is not None

    def trainer_expects_end(self, now: datetime) -> datetime | None:
        """When its trainer expects it to end, from the remaining time it last published
        (counted from when it said so); None when it said none."""
        if self.trainer_remaining_seconds is None:
            return None
        said_at = self.trainer_status_at or now
        return max(now, said_at + timedelta(seconds=self.trainer_remaining_seconds))
