"""REST API for teams, with their quotas and what their jobs use of them, and the per-person
caps their owners set (docs/caps.md)."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import mixins, serializers

from core.api_errors import Conflict, SlugRelatedField
from core.api_fields import StrictFields
from core.api_input import CursorPagination
from jobs import actions
from jobs.models import Job, Volume
from jobs.usage import job_gpus
from quotas.api import QuotaSerializer
from quotas.models import GpuFlavor, MemberCap
from tenants.models import Team
from tenants.scoping import TeamField, TeamFilterSet, TeamScopedViewSet, teams_of


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


class TeamDetailSerializer(TeamSerializer):
    role = serializers.SerializerMethodField()
    quotas = serializers.SerializerMethodField()
    my_caps = serializers.SerializerMethodField()

    class Meta(TeamSerializer.Meta):
        fields = TeamSerializer.Meta.fields + ["role", "quotas", "my_caps"]
        read_only_fields = fields

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
