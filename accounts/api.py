"""REST API of single sign-on: IdP group mappings (quota managers) and a team's access
("who can do what, and why")."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiTypes, extend_schema
from rest_framework import mixins, permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import RefuseNulMixin, SlugRelatedField
from core.api_fields import StrictFields
from tenants.auth import TokenScope, visible_teams
from tenants.models import Team
from tenants.models.identities import GroupMapping
from tenants.roles import is_quota_manager
from tenants.scoping import TeamScopedViewSet

from .access import team_access


class IsQuotaManager(permissions.BasePermission):
    message = "Only quota managers map IdP groups."

    def has_permission(self, request, view):
        return is_quota_manager(request.user)


class GroupMappingSerializer(StrictFields, serializers.ModelSerializer):
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


def _every_mapping(user):
    return GroupMapping.objects.all()  # quota managers only (IsQuotaManager): all of them


class GroupMappingViewSet(TeamScopedViewSet, mixins.CreateModelMixin, mixins.ListModelMixin,
                          mixins.RetrieveModelMixin, mixins.DestroyModelMixin):
    """IdP groups -> team roles and the quota-manager role. Memberships follow at each
    person's next SSO login. A token narrowed to a team sees that team's mappings only."""

    rows = staticmethod(_every_mapping)
    queryset = GroupMapping.objects.none()  # for the schema; rows and refine are the truth
    serializer_class = GroupMappingSerializer
    # Tokens may read (a token's writes need a scope, and none is for this).
    permission_classes = [permissions.IsAuthenticated, TokenScope, IsQuotaManager]

    def refine(self, mappings):
        return mappings.select_related("team")

    def perform_create(self, serializer):
        mapping = GroupMapping(**serializer.validated_data)
        mapping._history_user = self.request.user
        mapping.save()
        serializer.instance = mapping

    def perform_destroy(self, instance):
        instance._history_user = self.request.user
        instance.delete()


class TeamAccessView(RefuseNulMixin, APIView):
    """Who can do what in the team, and why (the team's members and quota managers see it)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, slug):
        # visible_teams: a token narrowed to another team sees nothing of this one.
        return Response(team_access(get_object_or_404(visible_teams(request), slug=slug)))
