"""The parts of a job's detail in the API (`jobs.api.views.JobDetailSerializer`): what its
GPUs do now (from Prometheus), its idle-GPU state and its preemptions."""

from rest_framework import serializers

from cluster.prometheus import PrometheusUnavailable
from core.api_errors import SlugRelatedField
from core.api_fields import StrictFields

from ..models import Job, Preemption
from ..models.idle import MAX_EXEMPT_REASON
from ..use import gpu_use, telemetry


class GpuUtilizationSerializer(serializers.Serializer):
    available = serializers.BooleanField(help_text="False when Prometheus could not be asked; message says why.")
    message = serializers.CharField(help_text="Empty, or why there are no figures (as the job page says it).")
    gpus_in_use = serializers.IntegerField(help_text="GPUs the job's pods hold now.")
    gpus_reporting = serializers.IntegerField(help_text="Of them, those dcgm-exporter reports for the job's pods.")
    gpus_busy = serializers.IntegerField(help_text="Of those reporting, the ones at or above the idle threshold.")
    mean_util_percent = serializers.FloatField(allow_null=True, help_text=(
        "Mean DCGM_FI_DEV_GPU_UTIL of the reporting GPUs now (0-100), or null when none reports."))
    mem_used_mib = serializers.FloatField(allow_null=True, help_text="GPU memory used now, MiB, summed over them.")


def gpu_utilization(job: Job) -> dict:
    """The job's GPUs now (one Prometheus query, a page's wait at most), or why not."""
    out = {"available": True, "message": "", "gpus_in_use": job.gpus_in_use, "gpus_reporting": 0, "gpus_busy": 0,
           "mean_util_percent": None, "mem_used_mib": None}
    if not job.gpus_in_use:
        return {**out, "message": "The job holds no GPUs now."}
    try:
        now = telemetry.utilization_now([job], prometheus=gpu_use.for_pages()).get(job.pk, telemetry.NO_GPUS)
    except PrometheusUnavailable as err:
        return {**out, "available": False, "message": gpu_use.unavailable(err)}
    threshold = gpu_use.idle_threshold()
    busy = sum(1 for gpu in now.gpus if gpu.util_percent is not None and gpu.util_percent >= threshold)
    return {**out, "gpus_reporting": now.gpus_reporting, "gpus_busy": busy,
            "mean_util_percent": now.mean_util_percent, "mem_used_mib": now.mem_used_mib,
            "message": "" if now.gpus_reporting else "No GPU of this job reports to Prometheus yet."}


class IdleSerializer(serializers.Serializer):
    watched = serializers.BooleanField(help_text="Whether an idle-GPU policy watches the job (docs/idle.md).")
    policy = serializers.CharField(help_text="The policy in force for the job's team and flavor, in words.")
    idle_seconds = serializers.IntegerField(help_text="How long every GPU of the job has been idle, at the last check.")
    checked_at = serializers.DateTimeField(allow_null=True)
    paused_reason = serializers.CharField(help_text="Why reclaim is paused for the job (metrics missing or stale).")
    warned_at = serializers.DateTimeField(allow_null=True, help_text="When the job was warned that its GPUs sit idle.")
    reclaim_at = serializers.DateTimeField(allow_null=True, help_text=(
        "When it will be reclaimed unless busy again (once reclaimed: when it was)."))
    exempt_reason = serializers.CharField(help_text="Why the job is exempt from idle reclaim; empty if it is not.")
    exempted_by = serializers.CharField(allow_null=True)
    idle_gpu_hours = serializers.DecimalField(max_digits=12, decimal_places=2, allow_null=True, help_text=(
        "A reclaimed job's idle GPU-hours: the GPUs it held, for the time they sat idle."))


class ExemptSerializer(StrictFields, serializers.Serializer):
    reason = serializers.CharField(max_length=MAX_EXEMPT_REASON, help_text="Why this job may keep idle GPUs.")


class PreemptionSerializer(serializers.ModelSerializer):
    """One preemption the job suffered (docs/preemption.md)."""

    by_team = SlugRelatedField(slug_field="slug", read_only=True, allow_null=True,
                               help_text="The team charged for the lost GPU-hours (null: a workload outside the platform).")
    by_job = serializers.CharField(source="by_job.name", read_only=True, allow_null=True, default=None)
    explanation = serializers.CharField(read_only=True, help_text="In plain words, as the job page says it.")

    class Meta:
        model = Preemption
        fields = ["preempted_at", "reason", "by_team", "by_job", "by_priority", "run_started_at", "checkpoint_at",
                  "lost_gpu_hours", "explanation"]
        read_only_fields = fields

    def to_representation(self, preemption: Preemption) -> dict:
        return {**super().to_representation(preemption), "explanation": preemption.explanation()}


class PreemptionContractSerializer(serializers.Serializer):
    checkpoint_grace_seconds = serializers.IntegerField(
        help_text="Seconds its pods have between SIGTERM and SIGKILL (env GPUPLATFORM_CHECKPOINT_GRACE_SECONDS).")
    minimum_runtime_seconds = serializers.IntegerField(help_text="Seconds after admission before it may be preempted.")
    protected_until = serializers.DateTimeField(allow_null=True, help_text="Until when it may not be preempted now.")
    preemptions = PreemptionSerializer(many=True)


