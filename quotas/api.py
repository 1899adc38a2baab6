"""REST API for GPU flavors and the training runtimes teams may use (read-only), the quota
serializer teams embed, quota requests and the grants they became, with their renewals (owners
ask; quota managers decide in the console, not here)."""

import django_filters
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.api_errors import RefuseNulMixin, SlugRelatedField
from core.api_fields import StrictFields
from core.api_filters import TrueFalseFilter
from core.api_input import CursorPagination
from tenants.auth import token_of
from tenants.scoping import TeamField, TeamFilterSet, TeamScopedViewSet
from tenants.tokens import Scope

from .grants import MAX_GPUS
from .models import GpuFlavor, Quota, QuotaGrant, QuotaRequest, TrainingRuntime
from .models.requests import MAX_JUSTIFICATION

# The fields an owner fills in, as on the team page's form.
REQUEST_FIELDS = ["flavor", "gpus", "borrowing_limit_gpus", "starts_on", "ends_on", "justification"]


class FlavorSerializer(serializers.ModelSerializer):
    unit = serializers.CharField(source="unit_description", read_only=True,
                                 help_text="What one unit of quota (one GPU a job asks for) means, in plain words.")
    unit_memory_mib = serializers.IntegerField(read_only=True, help_text=(
        "GPU memory one unit may count on: the GPU, the MIG slice, or an even share of a time-sliced or MPS GPU."))
    nccl_env = serializers.DictField(source="nccl_defaults", child=serializers.CharField(), read_only=True,
                                     help_text="NCCL variables multi-node jobs get (a job's own env wins).")
    topology = serializers.SerializerMethodField(help_text=(
        "The levels a training job may keep its workers in (its placement: rack or block), widest first, each with "
        "the node label that names it; empty: no topology."))

    class Meta:
        model = GpuFlavor
        fields = [
            "name", "display_name", "description", "resource_name", "gpu_model", "gpu_memory_gib",
            "gpus_per_node", "scheduler", "cost_per_gpu_hour", "gpu_sharing", "replicas_per_gpu", "unit",
            "unit_memory_mib", "network_fabric", "nccl_env", "rdma_resources", "topology", "backfill",
        ]
        read_only_fields = fields

    def get_topology(self, flavor) -> list[dict[str, str]]:
        return [{"level": level, "node_label": label} for level, label in flavor.topology_levels]


class QuotaSerializer(serializers.ModelSerializer):
    """A team's quota on one flavor with what its live jobs use of it.

    ``usage`` comes from the view (``{flavor_id: {...}}`` in the context), so a team with
    many quotas costs one query for all of them.
    """

    flavor = SlugRelatedField(slug_field="name", read_only=True)
    cohort = SlugRelatedField(slug_field="name", read_only=True, allow_null=True,
                              help_text="The cohort the quota borrows and lends in; null: none.")
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


class TrainingRuntimeSerializer(serializers.ModelSerializer):
    preset = serializers.SerializerMethodField(help_text=(
        "The job fields a TrainJob on this runtime starts from (kind, training_runtime, image, command, args, env, "
        "workers = nodes, gpus_per_worker): POST them to /api/v1/jobs with a team, a name and a flavor."))

    class Meta:
        model = TrainingRuntime
        fields = ["name", "label", "framework", "enabled", "installed", "checked_at", "preset"]
        read_only_fields = fields

        extra_kwargs = {
            "installed": {"help_text": (
                "Whether the cluster has this ClusterTrainingRuntime, as the platform last read it: false refuses "
                "new TrainJobs on it (ask the platform administrators); null: never checked, which refuses nothing.")},
            "checked_at": {"help_text": "When the platform last read the cluster for it; null: never."},
        }

    def get_preset(self, runtime) -> dict:
        return runtime.preset()


class TrainingRuntimeViewSet(RefuseNulMixin, viewsets.ReadOnlyModelViewSet):
    """The Kubeflow Trainer ClusterTrainingRuntimes a caller's teams may run TrainJobs on (a
    job's ``training_runtime``), each with its preset; quota managers, who choose them, see all."""

    serializer_class = TrainingRuntimeSerializer
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9.\-]+"
    pagination_class = FlavorPagination

    def get_queryset(self):
        token = token_of(self.request)  # a token narrowed to a team: that team's runtimes
        return TrainingRuntime.objects.visible_to(self.request.user, team_id=token.team_id if token else None)


# --- quota requests --------------------------------------------------------------------
# An owner's request for a quota change, as on the team page. Every rule is the model's:
# ``QuotaRequest.objects.visible_to`` decides what a caller sees (a token narrows it to its
# team), ``QuotaRequest.objects.submit`` is the only way one is filed (owners only,
# ``full_clean``). Deciding (approve/deny) stays in the quota console.


class QuotaRequestFilter(TeamFilterSet):
    status = django_filters.MultipleChoiceFilter(choices=QuotaRequest.Status.choices)

    class Meta:
        model = QuotaRequest
        fields = ["team", "status"]


class RequestStatusField(serializers.ChoiceField):
    """A request's status (pending, approved, denied)."""


class RequestStatusFieldSchema(OpenApiSerializerFieldExtension):
    """The status enum as its own named component. Left to drf-spectacular, a second
    enum field called ``status`` (teams have one) makes both get hashed names, renaming
    the teams' ``StatusEnum`` that clients already use."""

    target_class = RequestStatusField

    def map_serializer_field(self, auto_schema, direction):
        component = ResolvedComponent(
            name="QuotaRequestStatusEnum", type=ResolvedComponent.SCHEMA, object="QuotaRequestStatusEnum",
            schema={
                "type": "string", "enum": QuotaRequest.Status.values,
                "description": "\n".join(f"* `{value}` - {label}" for value, label in QuotaRequest.Status.choices),
            },
        )
        auto_schema.registry.register_on_missing(component)
        return component.ref


class QuotaGrantSummarySerializer(serializers.ModelSerializer):
    """What an approved request was granted (a quota manager may change the numbers)."""

    class Meta:
        model = QuotaGrant
        fields = ["id", "gpus", "borrowing_limit_gpus", "cpu_cores", "memory_gib", "starts_at", "ends_at"]
        read_only_fields = fields


class QuotaRequestSerializer(StrictFields, serializers.ModelSerializer):
    # Only teams the caller may see (and the token's team) can be named; any other is
    # "does not exist" (400), as for jobs.
    team = TeamField()
    flavor = SlugRelatedField(slug_field="name", queryset=GpuFlavor.objects.all())
    requested_by = SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    decided_by = SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    status = RequestStatusField(choices=QuotaRequest.Status.choices, read_only=True)
    grant = QuotaGrantSummarySerializer(
        read_only=True, allow_null=True, help_text="The grant an approval created; null until approved."
    )
    renews = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True,
        help_text="The grant this request asks to renew (POST /api/v1/quota-grants/{id}/renew); null: a new grant.")

    class Meta:
        model = QuotaRequest
        fields = [
            "id", "team", *REQUEST_FIELDS, "renews", "status", "requested_by", "created_at",
            "decided_by", "decided_at", "decision_reason", "grant",
        ]
        read_only_fields = [
            "id", "renews", "status", "requested_by", "created_at", "decided_by", "decided_at", "decision_reason",
            "grant",
        ]
        # QuotaRequest.full_clean (inside QuotaRequest.objects.submit) checks the
        # constraints with the model's own messages.
        validators = []

    def validate_team(self, team):
        # A team the caller sees but does not own: refused whatever the other fields say.
        # (QuotaRequest.objects.submit checks it again.)
        if not QuotaRequest.can_request(team, self.context["request"].user):
            raise exceptions.PermissionDenied(f"Only owners of {team.slug} can ask for a quota change.")
        return team

    def validate_starts_on(self, starts_on):
        # The team page's form has the same rule.
        if starts_on < timezone.localdate():
            raise serializers.ValidationError("The first day cannot be in the past.")
        return starts_on


class NewestFirst(CursorPagination):
    """Quota requests and grants, newest first."""

    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class QuotaRequestViewSet(TeamScopedViewSet, mixins.CreateModelMixin, mixins.ListModelMixin,
                          mixins.RetrieveModelMixin):
    """Quota requests of your teams (of every team for quota managers; of its team for a
    token), newest first. Owners file them here or on the team page; quota managers decide
    in the console."""

    rows = QuotaRequest.objects.visible_to
    serializer_class = QuotaRequestSerializer
    queryset = QuotaRequest.objects.none()  # for the schema; rows and refine are the truth
    pagination_class = NewestFirst
    filterset_class = QuotaRequestFilter
    required_scopes = {"create": Scope.SUBMIT}

    def refine(self, requests):
        return requests.select_related("team", "flavor", "requested_by", "decided_by", "grant")

    @extend_schema(responses={201: QuotaRequestSerializer})
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        created = QuotaRequest.objects.submit(team=data.pop("team"), requested_by=request.user, **data)
        created = self.get_queryset().get(pk=created.pk)
        headers = {"Location": f"{request.build_absolute_uri().rstrip('/')}/{created.pk}"}
        return Response(self.get_serializer(created).data, status=status.HTTP_201_CREATED, headers=headers)


# --- grants and their renewals -----------------------------------------------------------
# A team's grants, read by everyone in it; an owner asks here to carry one on past its end
# (``QuotaRequest.objects.renew`` holds every rule: owners only, renewable grants that have
# not ended, one pending renewal at a time). The renewal is a quota request, decided in the
# console under the same four eyes.


class QuotaGrantFilter(TeamFilterSet):
    renewable = TrueFalseFilter(help_text="Only grants that may (true) or may not (false) be renewed.")

    class Meta:
        model = QuotaGrant
        fields = ["team", "renewable"]


class QuotaGrantSerializer(serializers.ModelSerializer):
    team = SlugRelatedField(slug_field="slug", read_only=True)
    flavor = SlugRelatedField(slug_field="name", read_only=True)
    request = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True,
                                                 help_text="The quota request it was granted on; null: by hand.")

    class Meta:
        model = QuotaGrant
        fields = ["id", "team", "flavor", "gpus", "borrowing_limit_gpus", "cpu_cores", "memory_gib", "starts_at",
                  "ends_at", "renewable", "request", "note", "created_at"]
        read_only_fields = fields


class RenewalSerializer(StrictFields, serializers.Serializer):
    ends_on = serializers.DateField(help_text="The new last day (included).")
    gpus = serializers.IntegerField(required=False, min_value=-MAX_GPUS, max_value=MAX_GPUS,
                                    help_text="GPUs for the renewal; the grant's when left out.")
    justification = serializers.CharField(max_length=MAX_JUSTIFICATION, help_text="Why the team still needs the GPUs.")

    def validate_ends_on(self, ends_on):
        if ends_on < timezone.localdate():
            raise serializers.ValidationError("The new last day cannot be in the past.")
        return ends_on


class QuotaGrantViewSet(TeamScopedViewSet, mixins.ListModelMixin, mixins.RetrieveModelMixin):
    """Quota grants of your teams (of every team for quota managers; of its team for a
    token), newest first."""

    rows = QuotaGrant.objects.visible_to
    serializer_class = QuotaGrantSerializer
    queryset = QuotaGrant.objects.none()  # for the schema; rows and refine are the truth
    pagination_class = NewestFirst
    filterset_class = QuotaGrantFilter
    required_scopes = {"renew": Scope.SUBMIT}

    def refine(self, grants):
        return grants.select_related("team", "flavor")

    @extend_schema(request=RenewalSerializer, responses={201: QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def renew(self, request, pk=None):
        """Ask to renew or extend the grant until ``ends_on``: a quota request that a quota
        manager approves (possibly with other dates or numbers) or refuses with a reason."""
        grant = self.get_object()
        body = RenewalSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            renewal = QuotaRequest.objects.renew(grant, requested_by=request.user, **body.validated_data)
        except PermissionDenied as err:
            raise exceptions.PermissionDenied(str(err)) from err
        except ValidationError as err:
            raise serializers.ValidationError(err.message_dict) from err
        renewal = QuotaRequest.objects.select_related("team", "flavor", "requested_by", "decided_by", "grant",
                                                      "renews").get(pk=renewal.pk)
        location = request.build_absolute_uri(f"/api/v1/quota-requests/{renewal.pk}")
        return Response(QuotaRequestSerializer(renewal, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED, headers={"Location": location})
