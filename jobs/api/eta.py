"""The start estimate and the feasibility verdict in the API (docs/eta.md): their serializers
and who gets the advice; the job detail, the answers of a submission (first and replayed) and
of a dry run (`jobs.api.views`) carry them. And a waiting job's place in its queue: Kueue's
own position beside the platform's count."""

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


def eta_of_plan(job: Job, verdict) -> dict | None:
    """The start estimate of a job not submitted (a dry run): recorded nowhere, no advice."""
    estimate = estimates.estimate(job, record=False, advise=False, verdict=verdict)
    return None if estimate is None else estimate.as_dict()


class FeasibilitySerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=["now", "queue", "never"], help_text=(
        "now: fits the free quota (or what the cohort lends) and the free GPUs of the nodes; queue: waits behind "
        "other jobs, or for room on the nodes; never: cannot run as asked (bigger than a node, a rack or the "
        "team's quota with borrowing). Kueue's when kueue_reason is set, else GPU Platform's estimate."))
    message = serializers.CharField(help_text="GPU Platform's words: its estimate, or its reading of Kueue's.")
    kueue_reason = serializers.CharField(help_text=(
        "Kueue's own reason for not admitting the job, verbatim, when it gave one (then the verdict is Kueue's); "
        "empty before Kueue has looked at it."))
    kueue_message = serializers.CharField(help_text="Kueue's own message with kueue_reason, verbatim.")
    waits_for = serializers.ListField(child=serializers.IntegerField(), help_text=(
        "Ids of the running jobs whose end makes room for this one on the nodes (empty: none known)."))
    room_by = serializers.DateTimeField(allow_null=True, help_text=(
        "When the last of those jobs reaches its max runtime; null when one of them has none. The start "
        "estimate (the queue ahead too) is the body's eta."))


def feasibility_of(verdict: feasibility.Feasibility) -> dict:
    """A verdict (`jobs.outlook.feasibility.assess`) as the API says it."""
    return {"verdict": verdict.verdict, "message": verdict.message,
            "kueue_reason": verdict.kueue_reason, "kueue_message": verdict.kueue_message,
            "waits_for": [held.pk for held in verdict.waits_for],
            "room_by": serializers.DateTimeField().to_representation(verdict.room_by) if verdict.room_by else None}
