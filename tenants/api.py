"""REST API for teams (with quotas and usage) and for the caller's own API tokens."""

from datetime import timedelta

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from gpuplatform.api_auth import SessionOnly, token_of
from gpuplatform.api_errors import RefuseNulMixin, SlugRelatedField
from jobs.lifecycle import State
from jobs.models import Job
from quotas.api import QuotaSerializer

from .models import Team
from .tokens import ALL_SCOPES, ApiToken

RUNNING_STATES = {State.ADMITTED, State.RUNNING}


def visible_teams(request):
    """``Team.objects.visible_to`` narrowed to the request's token team, if any."""
    teams = Team.objects.visible_to(request.user)
    token = token_of(request)
    return token.narrow(teams, team_field="") if token else teams


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
        usage: dict[int, dict] = {}
        for job in Job.objects.filter(team=team).live().only(
            "flavor_id", "kind", "state", "workers", "gpus_per_worker", "max_replicas"
        ):
            bucket = usage.setdefault(job.flavor_id, {"running": 0, "pending": 0})
            bucket["running" if job.state in RUNNING_STATES else "pending"] += job.total_gpus
        return usage

    def get_quotas(self, team) -> QuotaSerializer(many=True):
        quotas = team.quotas.select_related("flavor", "cohort").with_cohort_lendable()
        return QuotaSerializer(quotas, many=True, context={**self.context, "usage": self._usage(team)}).data


class TeamPagination(CursorPagination):
    ordering = "slug"
    page_size = 50


class TeamViewSet(RefuseNulMixin, viewsets.ReadOnlyModelViewSet):
    """Your teams (every team for quota managers); a token sees only its own team."""

    lookup_field = "slug"
    pagination_class = TeamPagination
    filterset_fields = ["status"]

    def get_queryset(self):
        return visible_teams(self.request)

    def get_serializer_class(self):
        return TeamDetailSerializer if self.action == "retrieve" else TeamSerializer


class TokenSerializer(serializers.ModelSerializer):
    team = SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    is_expired = serializers.BooleanField(read_only=True)
    is_revoked = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiToken
        fields = [
            "id", "name", "team", "scopes", "prefix", "created_at", "expires_at",
            "last_used_at", "revoked_at", "is_expired", "is_revoked",
        ]
        read_only_fields = fields


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    team = SlugRelatedField(
        slug_field="slug", queryset=Team.objects.none(), required=False, allow_null=True,
        help_text="The one team the token acts for; leave out for all of your teams.",
    )
    scopes = serializers.MultipleChoiceField(choices=ALL_SCOPES, required=False, allow_empty=False)
    expires_in_days = serializers.IntegerField(min_value=1, max_value=365, default=90)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:
            self.fields["team"].queryset = Team.objects.visible_to(request.user)


class TokenCreatedSerializer(TokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret. Shown only in this response.")

    class Meta(TokenSerializer.Meta):
        fields = TokenSerializer.Meta.fields + ["token"]
        read_only_fields = fields


class TokenPagination(CursorPagination):
    ordering = "-id"
    page_size = 50


class TokenViewSet(RefuseNulMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Your own API tokens. Revoking keeps the row (with ``revoked_at``) for the record.
    Managed from a signed-in session only: a token cannot mint or revoke tokens."""

    serializer_class = TokenSerializer
    queryset = ApiToken.objects.none()  # for the schema; get_queryset is the truth
    permission_classes = [IsAuthenticated, SessionOnly]
    pagination_class = TokenPagination

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user).select_related("team")

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def create(self, request):
        form = TokenCreateSerializer(data=request.data, context={"request": request})
        form.is_valid(raise_exception=True)
        data = form.validated_data
        token, secret = ApiToken.objects.issue(
            user=request.user, name=data["name"], team=data.get("team"),
            scopes=sorted(data.get("scopes") or ALL_SCOPES),
            lifetime=timedelta(days=data["expires_in_days"]),
        )
        token.token = secret
        return Response(TokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request, pk=None):
        self.get_object().revoke()
        return Response(status=status.HTTP_204_NO_CONTENT)
