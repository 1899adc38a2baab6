"""The start estimate in the API (docs/eta.md): its serializers and who gets its advice; the
job detail and the 201 body of a submission (`jobs.api.views`) carry it."""

from rest_framework import serializers

from ..models import Job
from ..outlook import estimates


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
