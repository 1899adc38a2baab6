"""REST API for teams, with their quotas and what their jobs use of them, the per-person
caps their owners set (docs/caps.md), and the drains of GPU pools (docs/drain.md)."""

from dataclasses import replace

import django_filters
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.api_errors import Conflict, RefuseNulMixin, SlugRelatedField, error_response
from core.api_fields import StrictFields
from core.api_input import CursorPagination
from jobs import actions
from jobs.models import Job, Volume
from jobs.outlook import drains
from jobs.use.usage import job_gpus
from quotas import actions as quota_actions
from quotas.api import QuotaSerializer
from quotas.fairshare import fair_shares
from quotas.models import Drain, GpuFlavor, MemberCap
from tenants.auth import TokenScope
from tenants.models import Team
from tenants.roles import is_quota_manager
from tenants.scoping import TeamField, TeamFilterSet, TeamScopedViewSet, team_names_shown, teams_of


class TeamSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace_name", read_only=True)

    class Meta:
        model = Team
        fields = ["slug", "display_name", "description", "status", "status_message", "namespace"]
        read_only_fields = fields


class MyCapSerializer(serializers.Serializer):
    """A cap that holds you in the team, on one flavor, and what you hold under it."""

    flavor = serializers.CharField(source="cap.flavor.name")
    max_gpus = serializers.IntegerField(source="cap.max_gpus")
    max_jobs = serializers.IntegerField(source="cap.max_jobs", allow_null=True)
    team_default = serializers.BooleanField(source="cap.is_default",
                                            help_text="True: the team's default for everyone; false: your own.")
    held_gpus = serializers.IntegerField(help_text="GPUs of your jobs on the cluster and not finished.")
    held_jobs = serializers.IntegerField()
    waiting_jobs = serializers.IntegerField(help_text="Your jobs waiting at this cap, not yet created.")


def _use(holdings: dict, user_id, flavor_id) -> dict:
    return holdings.get((user_id, flavor_id), {"gpus": 0, "jobs": 0, "waiting": 0})


class FairShareQueueSerializer(serializers.Serializer):
    """One team's ClusterQueue in the cohort, as Kueue's fair-sharing status shows it."""

    team = serializers.CharField(allow_null=True, help_text="null: a team you may not see.")
    weight = serializers.DecimalField(max_digits=12, decimal_places=3, coerce_to_string=False)
    weighted_share = serializers.IntegerField(
        source="share", allow_null=True,
        help_text="Kueue's weightedShare: the cohort's spare GPUs it uses, per mille, divided by its weight; "
                  "the lowest goes first. null: fair sharing is off.")
    nominal_gpus = serializers.IntegerField()
    borrowed_gpus = serializers.IntegerField()


class FairShareSerializer(serializers.Serializer):
    """Why the team's jobs on a flavor go before or after the cohort's other teams' (quotas/fairshare.py)."""

    flavor = serializers.CharField()
    cohort = serializers.CharField()
    explanation = serializers.CharField(source="text")
    queues = FairShareQueueSerializer(source="members", many=True)


class TeamDetailSerializer(TeamSerializer):
    role = serializers.SerializerMethodField()
    quotas = serializers.SerializerMethodField()
    my_caps = serializers.SerializerMethodField()
    fair_share = serializers.SerializerMethodField()
    fair_share_problem = serializers.SerializerMethodField()

    class Meta(TeamSerializer.Meta):
        fields = TeamSerializer.Meta.fields + ["role", "quotas", "my_caps", "fair_share", "fair_share_problem"]
        read_only_fields = fields

    def _fair_share(self, team) -> tuple[list, str]:
        if "fair_share" not in self.context:  # one read of Kueue's status for both fields
            named = team_names_shown(self.context["request"])
            shares, problem = fair_shares([team], named=named)
            hidden = [[replace(m, team=m.team if named(m.team) else None) for m in s.members] for s in shares]
            self.context["fair_share"] = ([replace(s, members=m) for s, m in zip(shares, hidden, strict=True)],
                                          problem)
        return self.context["fair_share"]

    def get_fair_share(self, team) -> FairShareSerializer(many=True):
        """Kueue's fair share of each of the team's quotas in a cohort, in words and numbers
        (docs/quotas.md); empty when it has none."""
        return FairShareSerializer(self._fair_share(team)[0], many=True).data

    def get_fair_share_problem(self, team) -> str:
        """Why Kueue's fair-sharing status could not be read ("" when it was)."""
        return self._fair_share(team)[1]

    def get_my_caps(self, team) -> MyCapSerializer(many=True):
        """The per-person caps that hold you in this team (docs/caps.md) and your use of each;
        empty when none does."""
        user = self.context["request"].user
        caps = MemberCap.objects.effective_for(team, user)
        holdings = Job.objects.cap_holdings(team.pk) if caps else {}
        mine = []
        for cap in caps:
            use = _use(holdings, user.pk, cap.flavor_id)
            mine.append({"cap": cap, "held_gpus": use["gpus"], "held_jobs": use["jobs"],
                         "waiting_jobs": use["waiting"]})
        return MyCapSerializer(mine, many=True).data

    def get_role(self, team) -> str | None:
        """Your role in the team (owner, member, viewer), or null (quota managers)."""
        return team.role_of(self.context["request"].user)

    def _usage(self, team) -> dict:
        return {flavor_id: {"running": gpus.in_use, "pending": gpus.waiting}
                for (_, flavor_id), gpus in job_gpus([team]).items()}

    def get_quotas(self, team) -> QuotaSerializer(many=True):
        quotas = team.quotas.select_related("flavor", "cohort").with_cohort_lendable()
        return QuotaSerializer(quotas, many=True, context={**self.context, "usage": self._usage(team)}).data


class TeamPagination(CursorPagination):
    ordering = "slug"
    page_size = 50


class TeamViewSet(TeamScopedViewSet, mixins.ListModelMixin, mixins.RetrieveModelMixin):
    """Your teams (every team for quota managers); a token sees only its own team."""

    rows = Team.objects.visible_to
    team_field = ""  # the rows are the teams
    queryset = Team.objects.none()  # for the schema; rows are the truth
    lookup_field = "slug"
    pagination_class = TeamPagination
    filterset_fields = ["status"]

    def get_serializer_class(self):
        return TeamDetailSerializer if self.action == "retrieve" else TeamSerializer


# --- per-person caps ----------------------------------------------------------------------
# Everyone in a team reads its caps (theirs and their teammates'); its owners set them
# (`MemberCap.save_by`, from a signed-in session: a token reads). A change lets go at once the
# jobs that waited at a cap and fit now (`jobs.actions.save_cap`).


class MemberCapFilter(TeamFilterSet):
    class Meta:
        model = MemberCap
        fields = ["team"]


class PersonField(SlugRelatedField):
    """A person by user name, among the people of the teams the caller may see."""

    def get_queryset(self):
        return get_user_model().objects.filter(
            memberships__team__in=teams_of(self.context.get("request"))).distinct()


class MemberCapSerializer(StrictFields, serializers.ModelSerializer):
    team = TeamField()
    flavor = SlugRelatedField(slug_field="name", queryset=GpuFlavor.objects.all())
    user = PersonField(slug_field="username", queryset=get_user_model().objects.none(), allow_null=True,
                       required=False, help_text="The person it holds, by user name; null (the default): the "
                       "team's default for everyone who submits in it, owners included.")
    set_by = SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    held_gpus = serializers.SerializerMethodField()
    held_jobs = serializers.SerializerMethodField()
    waiting_jobs = serializers.SerializerMethodField()

    class Meta:
        model = MemberCap
        fields = ["id", "team", "flavor", "user", "max_gpus", "max_jobs", "held_gpus", "held_jobs", "waiting_jobs",
                  "set_by", "updated_at"]
        read_only_fields = ["id", "set_by", "updated_at"]
        validators = []  # MemberCap.full_clean (in save_by) says them as field errors

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance is not None:  # what a cap is about never changes: remove it instead
            for name in ("team", "flavor", "user"):
                self.fields[name].read_only = True

    def validate_team(self, team):
        if not MemberCap.can_manage(team, self.context["request"].user):
            raise serializers.ValidationError(f"Only owners of {team.slug} set the caps of its people.")
        return team

    def _use(self, cap) -> dict | None:
        if cap.user_id is None:
            return None  # a default holds many people: each one's use is on their own answer
        cached = self.context.setdefault("_holdings", {})
        if cap.team_id not in cached:
            cached[cap.team_id] = Job.objects.cap_holdings(cap.team_id)
        return _use(cached[cap.team_id], cap.user_id, cap.flavor_id)

    def get_held_gpus(self, cap) -> int | None:
        """GPUs of the person's jobs of the flavor on the cluster and not finished; null for a default."""
        use = self._use(cap)
        return use and use["gpus"]

    def get_held_jobs(self, cap) -> int | None:
        use = self._use(cap)
        return use and use["jobs"]

    def get_waiting_jobs(self, cap) -> int | None:
        """The person's jobs waiting at this cap (not yet created); null for a default."""
        use = self._use(cap)
        return use and use["waiting"]


class CapPagination(CursorPagination):
    ordering = "id"
    page_size = 100


class MemberCapViewSet(TeamScopedViewSet, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                       mixins.CreateModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin):
    """Per-person caps of your teams: how many GPUs of a flavor (and how many jobs) one person
    may hold at once. Everyone in a team reads them; owners set them from a signed-in session."""

    rows = MemberCap.objects.visible_to
    serializer_class = MemberCapSerializer
    queryset = MemberCap.objects.none()  # for the schema; rows and refine are the truth
    pagination_class = CapPagination
    filterset_class = MemberCapFilter
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def refine(self, caps):
        return caps.select_related("team", "flavor", "user", "set_by")

    def perform_create(self, serializer):
        cap = MemberCap(**serializer.validated_data)
        actions.save_cap(cap, self.request.user)
        serializer.instance = cap

    def perform_update(self, serializer):
        cap = serializer.instance
        for name, value in serializer.validated_data.items():
            setattr(cap, name, value)
        actions.save_cap(cap, self.request.user)

    def perform_destroy(self, instance):
        actions.remove_cap(instance, self.request.user)


# --- drains (docs/drain.md) ---------------------------------------------------------------------
class ReadOrQuotaManager(permissions.BasePermission):
    """Everyone signed in reads drains (they say when a pool is closed); quota managers write."""

    message = "Only quota managers drain GPU pools."

    def has_permission(self, request, view):
        return request.method in permissions.SAFE_METHODS or is_quota_manager(request.user)


class StillRunningSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="job.pk")
    name = serializers.CharField(source="job.name")
    team = serializers.CharField(source="job.team.slug")
    state = serializers.CharField(source="job.state")
    ends_at = serializers.DateTimeField(allow_null=True, help_text="Its maximum runtime's end; null: none.")


class DrainSerializer(StrictFields, serializers.ModelSerializer):
    flavor = SlugRelatedField(slug_field="name", queryset=GpuFlavor.objects.all())
    phase = serializers.SerializerMethodField(help_text="scheduled, draining, closed, reopened or ended.")
    holds_queues = serializers.BooleanField(read_only=True, help_text=(
        "True: Kueue holds the flavor's queues (jobs wait until it reopens); false (Volcano): jobs that would "
        "outlive the deadline are refused."))
    empty_at = serializers.SerializerMethodField(help_text="When the last job on the pool should end; null: "
                                                           "a job without a maximum runtime still runs.")
    still_running = serializers.SerializerMethodField(help_text="Quota managers only: the jobs on the pool.")
    created_by = serializers.CharField(source="created_by.get_username", read_only=True, default=None)

    class Meta:
        model = Drain
        fields = ["id", "flavor", "nodes", "starts_at", "deadline", "reopens_at", "reason", "phase", "holds_queues",
                  "empty_at", "still_running", "created_by", "created_at", "ended_at"]
        read_only_fields = ["id", "phase", "holds_queues", "empty_at", "still_running", "created_by", "created_at",
                            "ended_at"]

    def _pool(self, drain):
        if not hasattr(drain, "_pool"):
            drain._pool = drains.on_pool(drain)
        return drain._pool

    def get_phase(self, drain) -> str:
        return drain.phase()

    def get_empty_at(self, drain) -> serializers.DateTimeField(allow_null=True):
        empty_at = self._pool(drain).empty_at
        return serializers.DateTimeField().to_representation(empty_at) if empty_at else None

    def get_still_running(self, drain) -> StillRunningSerializer(many=True, allow_null=True):
        if not is_quota_manager(self.context["request"].user):
            return None
        return StillRunningSerializer(self._pool(drain).running, many=True).data

    def validate(self, attrs):
        drain = Drain(**attrs)
        try:
            drain.clean_fields(exclude=["created_by", "ended_by"])
            drain.clean()
        except DjangoValidationError as err:
            raise serializers.ValidationError(serializers.as_serializer_error(err)) from err
        return attrs


class DrainFilter(django_filters.FilterSet):
    flavor = django_filters.ModelChoiceFilter(to_field_name="name", queryset=GpuFlavor.objects.all())

    class Meta:
        model = Drain
        fields = ["flavor"]


class DrainPagination(CursorPagination):
    ordering = "-id"
    page_size = 50


class DrainViewSet(RefuseNulMixin, viewsets.GenericViewSet, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                   mixins.CreateModelMixin):
    """Drains of GPU pools: read by everyone signed in, declared and ended by quota managers."""

    queryset = Drain.objects.select_related("flavor", "created_by")
    serializer_class = DrainSerializer
    permission_classes = [permissions.IsAuthenticated, TokenScope, ReadOrQuotaManager]
    pagination_class = DrainPagination
    filterset_class = DrainFilter

    def perform_create(self, serializer):
        serializer.instance = quota_actions.declare_drain(Drain(**serializer.validated_data), self.request.user)

    @extend_schema(request=None, responses={200: DrainSerializer, 409: error_response("This drain is already over.")})
    @action(detail=True, methods=["post"])
    def end(self, request, pk=None):
        """End the drain now: the pool reopens at once."""
        drain = self.get_object()
        if not quota_actions.end_drain(drain, request.user):
            raise Conflict("This drain is already over.")
        drain.refresh_from_db()
        return Response(DrainSerializer(drain, context=self.get_serializer_context()).data)


# --- volumes ---------------------------------------------------------------------------------
# Everyone in a team reads its volumes and the live jobs that mount them; owners (and quota
# managers) create and delete them (`jobs.actions`); a volume a live job mounts is kept (409).


class VolumeFilter(TeamFilterSet):
    class Meta:
        model = Volume
        fields = ["team", "storage_class"]


class VolumeSerializer(StrictFields, serializers.ModelSerializer):
    team = TeamField()
    created_by = SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    mounted_by = serializers.SerializerMethodField()

    class Meta:
        model = Volume
        fields = ["id", "team", "name", "storage_class", "size_gib", "created_by", "created_at", "mounted_by"]
        read_only_fields = ["id", "created_by", "created_at", "mounted_by"]
        validators = []  # Volume.full_clean (in Volume.objects.add) says them as field errors

    def validate_team(self, team):
        if not Volume.can_manage(team, self.context["request"].user):
            raise serializers.ValidationError(f"Only owners of {team.slug} create its volumes.")
        return team

    def get_mounted_by(self, volume) -> list[str]:
        """Names of the team's live jobs that mount it."""
        return sorted(volume.mounted_by().values_list("name", flat=True))


class VolumeViewSet(TeamScopedViewSet, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    mixins.CreateModelMixin, mixins.DestroyModelMixin):
    """Your teams' named volumes (PersistentVolumeClaims) that jobs mount by name
    (`volumes`: name -> mount path). Everyone in a team reads them; owners create and delete
    them from a signed-in session (a token reads); deleting one a live job mounts answers 409."""

    rows = Volume.objects.visible_to
    serializer_class = VolumeSerializer
    queryset = Volume.objects.none()  # for the schema; rows and refine are the truth
    pagination_class = CapPagination
    filterset_class = VolumeFilter

    def refine(self, volumes):
        return volumes.select_related("team", "created_by")

    def perform_create(self, serializer):
        serializer.instance = actions.create_volume(user=self.request.user, **serializer.validated_data)

    def perform_destroy(self, instance):
        try:
            actions.delete_volume(instance, self.request.user)
        except DjangoValidationError as err:
            raise Conflict(err.messages[0]) from err
