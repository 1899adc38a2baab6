"""REST API of single sign-on: IdP group mappings (quota managers) and a team's access
("who can do what, and why")."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiTypes, extend_schema
from rest_framework import mixins, permissions, serializers, viewsets
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import RefuseNulMixin, SlugRelatedField
from tenants.auth import TokenScope, token_of
from tenants.identities import GroupMapping
from tenants.models import Team
from tenants.roles import is_quota_manager

from .access import team_access


class IsQuotaManager(permissions.BasePermission):
    message = "Only quota managers map IdP groups."

    def has_permission(self, request, view):
        return is_quota_manager(request.user)


class GroupMappingSerializer(serializers.ModelSerializer):
    team = SlugRelatedField(slug_field="slug", queryset=Team.objects.exclude(status=Team.Status.DELETING),
                            required=False, allow_null=True)

    class Meta:
        model = GroupMapping
        fields = ["id", "group", "role", "team", "created_at"]
        read_only_fields = ["id", "created_at"]

    def validate(self, attrs):
        role, team = attrs.get("role"), attrs.get("team")
        if role == GroupMapping.Role.QUOTA_MANAGER and team is not None:
            raise serializers.ValidationError({"team": "The quota-manager role is platform-wide: leave it out."})
        if role != GroupMapping.Role.QUOTA_MANAGER and team is None:
            raise serializers.ValidationError({"team": "A team role needs a team."})
        exists = GroupMapping.objects.filter(group=attrs["group"], team=team, role=role) if team is None \
            else GroupMapping.objects.filter(group=attrs["group"], team=team)
        if exists.exists():
            raise serializers.ValidationError({"group": "This group is mapped here already."})
        return attrs


class GroupMappingViewSet(RefuseNulMixin, mixins.CreateModelMixin, mixins.ListModelMixin,
                          mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """IdP groups -> team roles and the quota-manager role. Memberships follow at each
    person's next SSO login."""

    serializer_class = GroupMappingSerializer
    queryset = GroupMapping.objects.select_related("team").order_by("pk")
    # Tokens may read (a token's writes need a scope, and none is for this).
    permission_classes = [permissions.IsAuthenticated, TokenScope, IsQuotaManager]

    def perform_create(self, serializer):
        mapping = GroupMapping(**serializer.validated_data)
        mapping._history_user = self.request.user
        mapping.save()
        serializer.instance = mapping

    def perform_destroy(self, instance):
        instance._history_user = self.request.user
        instance.delete()


class TeamAccessView(APIView):
    """Who can do what in the team, and why (the team's members and quota managers see it)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug):
        team = get_object_or_404(Team.objects.visible_to(request.user), slug=slug)
        token = token_of(request)
        if token is not None:  # a token narrowed to another team sees nothing of this one
            team = get_object_or_404(token.narrow(Team.objects.filter(pk=team.pk), team_field=None))
        return Response(team_access(team))
