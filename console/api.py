"""REST API for teams, with their quotas and what their jobs use of them."""

from rest_framework import mixins, serializers

from core.api_input import CursorPagination
from jobs.usage import job_gpus
from quotas.api import QuotaSerializer
from tenants.models import Team
from tenants.scoping import TeamScopedViewSet


class TeamSerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace_name", read_only=True)

    class Meta:
        model = Team
        fields = ["slug", "display_name", "description", "status", "status_message", "namespace"]
        read_only_fields = fields


class TeamDetailSerializer(TeamSerializer):
    role = serializers.SerializerMethodField()
    quotas = serializers.SerializerMethodField()

    class Meta(TeamSerializer.Meta):
        fields = TeamSerializer.Meta.fields + ["role", "quotas"]
        read_only_fields = fields

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


