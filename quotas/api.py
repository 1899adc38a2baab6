"""REST API for GPU flavors (read-only) and the quota serializer teams embed."""

from rest_framework import serializers, viewsets
from rest_framework.pagination import CursorPagination

from gpuplatform.api_errors import RefuseNulMixin, SlugRelatedField

from .models import GpuFlavor, Quota


class FlavorSerializer(serializers.ModelSerializer):
    class Meta:
        model = GpuFlavor
        fields = [
            "name", "display_name", "description", "resource_name", "gpu_memory_gib",
            "gpus_per_node", "scheduler", "cost_per_gpu_hour",
        ]
        read_only_fields = fields


class QuotaSerializer(serializers.ModelSerializer):
    """A team's quota on one flavor with what its live jobs use of it.

    ``usage`` comes from the view (``{flavor_id: {...}}`` in the context), so a team with
    many quotas costs one query for all of them.
    """

    flavor = SlugRelatedField(slug_field="name", read_only=True)
    cohort = SlugRelatedField(slug_field="name", read_only=True)
    ceiling_gpus = serializers.IntegerField(read_only=True)
    running_gpus = serializers.SerializerMethodField()
    pending_gpus = serializers.SerializerMethodField()

    class Meta:
        model = Quota
        fields = [
            "flavor", "cohort", "nominal_gpus", "borrowing_limit_gpus", "lending_limit_gpus",
            "ceiling_gpus", "cpu_cores", "memory_gib", "weight", "running_gpus", "pending_gpus",
        ]
        read_only_fields = fields

    def _usage(self, quota) -> dict:
        return self.context.get("usage", {}).get(quota.flavor_id, {})

    def get_running_gpus(self, quota) -> int:
        """GPUs of the team's admitted and running jobs on this flavor."""
        return self._usage(quota).get("running", 0)

    def get_pending_gpus(self, quota) -> int:
        """GPUs asked for by the team's jobs still waiting for admission on this flavor."""
        return self._usage(quota).get("pending", 0)


class FlavorPagination(CursorPagination):
    ordering = "name"
    page_size = 50


class FlavorViewSet(RefuseNulMixin, viewsets.ReadOnlyModelViewSet):
    """Hardware pools. Every signed-in person (and token) may read them: they are what a
    job names as its ``flavor``."""

    serializer_class = FlavorSerializer
    queryset = GpuFlavor.objects.all()
    lookup_field = "name"
    pagination_class = FlavorPagination
    filterset_fields = ["scheduler", "resource_name"]
