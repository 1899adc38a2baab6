"""REST API for the caller's own API tokens (teams, with quotas and usage: `console.api`)."""

from datetime import timedelta

from django.utils.cache import add_never_cache_headers
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from tenants.auth import SessionOnly
from core.api_errors import RefuseNulMixin, SlugRelatedField
from core.api_input import CursorPagination

from .models import Team
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
        response = Response(TokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)
        add_never_cache_headers(response)  # the secret must not stay in any cache on the way
        return response

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request, pk=None):
        self.get_object().revoke()
        return Response(status=status.HTTP_204_NO_CONTENT)
