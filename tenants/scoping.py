"""One scoped base for the API's team-owned resources: the viewset, the team field of a
serializer and the team filter of a FilterSet.

A viewset of team-owned rows declares what it scopes (``rows``: the model's one visibility
rule, e.g. ``Job.objects.visible_to``) and where the owning team is (``team_field``); the
base narrows that to a token's team and nothing else in the viewset repeats it. A
serializer names teams with ``TeamField`` and a FilterSet filters on them with
``TeamFilterSet``: both among the teams the request may see, narrowed the same way, so a
team you cannot see is "does not exist" (400), never a leak.

``tests/api/test_scoping.py`` walks every API route as an owner, a member, a viewer, an
outsider and a token narrowed to another team.
"""

from collections.abc import Callable

import django_filters
from django.db.models import QuerySet
from rest_framework import viewsets

from core.api_errors import RefuseNulMixin, SlugRelatedField
from core.api_input import CursorPagination

from .auth import token_of, visible_teams
from .models import Team


def teams_of(request) -> QuerySet:
    """The teams a request may name: ``visible_teams`` (none without a request)."""
    return visible_teams(request) if request is not None and hasattr(request, "user") else Team.objects.none()


def team_names_shown(request) -> Callable[[str], bool]:
    """``named(slug)``: whether the request may read a team's name, of the teams it may see
    (`teams_of`: every team for a quota manager); what tells others apart says "another team"."""
    return set(teams_of(request).values_list("slug", flat=True)).__contains__


class TeamField(SlugRelatedField):
    """A team by slug, among those the caller may see (narrowed to the token's team)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("help_text", "A team you are in, by slug.")
        super().__init__(slug_field="slug", queryset=Team.objects.none(), **kwargs)

    def get_queryset(self):
        return teams_of(self.context.get("request"))


class TeamFilterSet(django_filters.FilterSet):
    """A FilterSet with ``team`` (a slug) among the teams the request may see."""

    team = django_filters.ModelChoiceFilter(field_name="team", to_field_name="slug", queryset=Team.objects.none())

    def __init__(self, *args, request=None, **kwargs):
        super().__init__(*args, request=request, **kwargs)
        self.filters["team"].queryset = teams_of(request)


class TeamScopedViewSet(RefuseNulMixin, viewsets.GenericViewSet):
    """Rows a caller may see by the model's rule, narrowed to a token's team.

    ``rows(user)`` is the visibility rule; ``team_field`` the path to the owning team
    ("" when the rows are teams); ``refine(queryset)`` adds what an action reads."""

    rows: Callable[..., QuerySet]
    team_field = "team"
    pagination_class = CursorPagination

    def scoped(self) -> QuerySet:
        rows = self.rows(self.request.user)
        token = token_of(self.request)
        return token.narrow(rows, team_field=self.team_field) if token else rows

    def get_queryset(self):
        return self.refine(self.scoped())

    def refine(self, queryset: QuerySet) -> QuerySet:
        return queryset
