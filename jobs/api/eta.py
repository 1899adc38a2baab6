"""The start estimate in the API (docs/eta.md): its serializers and who gets its advice; the
job detail and the 201 body of a submission (`jobs.api.views`) carry it. And a waiting job's
place in its queue: Kueue's own position beside the platform's count."""

from rest_framework import serializers

from ..models import Job
from ..outlook import estimates, feasibility


class AdviceSerializer(serializers.Serializer):
    change = serializers.ChoiceField(choices=["fewer_gpus", "other_flavor"])
    message = serializers.CharField()
    p50_seconds = serializers.IntegerField(help_text="The median estimate with the change, seconds from now.")
    clone_url = serializers.CharField(help_text="The submit form, filled with this job and the change.")


class EtaSerializer(serializers.Serializer):
    """When a waiting job will start (docs/eta.md): seconds from now, or unknown and why."""

    known = serializers.BooleanField()
    p10_seconds = serializers.IntegerField(allow_null=True)
    p50_seconds = serializers.IntegerField(allow_null=True)
    p90_seconds = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(help_text="Why it is unknown; empty when known.")
    message = serializers.CharField(help_text="The estimate in plain words, as the job page says it.")
    sooner = AdviceSerializer(many=True, help_text="Changes that would start it sooner (owners and members only).")


def eta_of(job: Job, user, verdict=None) -> dict | None:
    """The job's start estimate; null unless it waits. Advice only for who may clone it."""
    if not estimates.applies(job):
        return None
    estimate = estimates.estimate(job, advise=lambda: user is not None and job.team.can_submit(user), verdict=verdict)
    return None if estimate is None else estimate.as_dict()


class PlaceSerializer(serializers.Serializer):
    """Where a waiting job stands: Kueue's own position (its visibility API), and GPU Platform's count."""

    kueue_position = serializers.IntegerField(allow_null=True, help_text=(
        "Kueue's own positionInClusterQueue of the job's workload, verbatim (0: first; every pending workload "
        "counts, those that can never start too); null when Kueue's visibility API did not list it."))
    jobs_ahead = serializers.IntegerField(help_text=(
        "GPU Platform's count of the team's jobs on the flavor that can start and will be considered first."))
    in_kueue_order = serializers.BooleanField(help_text=(
        "Whether jobs_ahead follows Kueue's own pending order (else the same order counted from the database)."))


def place_of(job: Job) -> dict | None:
    """The job's place in its queue; null unless it waits and can start some day."""
    if not estimates.applies(job):
        return None
    found = feasibility.place(job)
    if found is None:
        return None
    return {"kueue_position": found.kueue_position, "jobs_ahead": found.ahead, "in_kueue_order": found.in_kueue_order}
