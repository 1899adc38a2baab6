"""REST API for the caller's own API tokens and who the caller is (`/me`: teams, with quotas and
usage, are `console.api`'s)."""

from datetime import timedelta

from django.utils.cache import add_never_cache_headers
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import RefuseNulMixin, SlugRelatedField
from core.api_fields import StrictFields
from core.api_input import CursorPagination
from tenants.auth import SessionOnly, token_of

from .models import Membership, Team
from .roles import is_quota_manager
from .tokens import ALL_SCOPES, ApiToken


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


@extend_schema_field({"type": "array", "minItems": 1, "items": {"type": "string", "enum": ALL_SCOPES}})
class ScopesField(serializers.ListField):
    """A list of scope names; a wrong one is an error on ``scopes`` itself."""

    child = serializers.CharField()

    def to_internal_value(self, data):
        scopes = super().to_internal_value(data)
        unknown = sorted(set(scopes) - set(ALL_SCOPES))
        if unknown:
            raise serializers.ValidationError(f"Unknown scope {', '.join(unknown)}: choose from {', '.join(ALL_SCOPES)}.")
        return sorted(set(scopes))


class TokenCreateSerializer(StrictFields, serializers.Serializer):
    name = serializers.CharField(max_length=100)
    team = SlugRelatedField(
        slug_field="slug", queryset=Team.objects.none(), required=False, allow_null=True,
        help_text="The one team the token acts for; leave out for all of your teams.",
    )
    scopes = ScopesField(
        required=False, allow_empty=False,
        help_text="Leave out for every scope you can use; submit and cancel only where you are an owner or member.",
    )
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
            scopes=data.get("scopes"),  # None: every scope the person can use
            lifetime=timedelta(days=data["expires_in_days"]),
        )
        token.token = secret
        response = Response(TokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)
        add_never_cache_headers(response)  # the secret must not stay in any cache on the way
        return response

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request, pk=None):
        self.get_object().revoke()
        return Response(status=status.HTTP_204_NO_CONTENT)


class MyTeamSerializer(serializers.Serializer):
    slug = serializers.CharField(source="team.slug")
    display_name = serializers.CharField(source="team.display_name")
    role = serializers.ChoiceField(choices=Membership.Role.choices, help_text="Your role in the team.")


class MyTokenSerializer(serializers.ModelSerializer):
    team = SlugRelatedField(slug_field="slug", read_only=True, allow_null=True,
                            help_text="The one team the token acts for; null: all of your teams.")

    class Meta:
        model = ApiToken
        fields = ["name", "prefix", "team", "scopes", "expires_at"]
        read_only_fields = fields


class WhoAmISerializer(serializers.Serializer):
    username = serializers.CharField()
    quota_manager = serializers.BooleanField(help_text="Whether you manage every team's quotas.")
    token = MyTokenSerializer(allow_null=True, help_text="The token this request came with; null in a session.")
    teams = MyTeamSerializer(many=True, help_text=(
        "The teams you are in, with your role (narrowed to the token's team, as every answer to it)."))


class WhoAmIView(RefuseNulMixin, APIView):
    """Who the caller is: the person, the token they call with, their teams and roles there."""

    @extend_schema(responses={200: WhoAmISerializer})
    def get(self, request):
        token = token_of(request)
        memberships = Membership.objects.filter(user=request.user).select_related("team").order_by("team__slug")
        if token is not None:
            memberships = token.narrow(memberships)
        return Response(WhoAmISerializer({
            "username": request.user.get_username(), "quota_manager": is_quota_manager(request.user),
            "token": token, "teams": memberships,
        }).data)
