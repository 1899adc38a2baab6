"""The team picker of the pages that filter by team (the job list, the usage page).

While a person sees few teams it is a <select> of them; past `TEAM_SELECT_MAX` (a quota
manager sees every team, a thousand of them) it is a slug input whose suggestions come as
one types: the page's own URL answers the input's htmx request (`answer_suggestions`), so
no page renders a thousand options. `templates/partials/team_picker.html` draws it.
"""

from django.shortcuts import render

from .models import Team

TEAM_SELECT_MAX = 50
TEAM_SUGGESTIONS = 20
SUGGESTIONS_TARGET = "team-options"  # the <datalist>'s id, which the input's htmx call swaps


def picker(user, chosen: str) -> dict:
    """Template context of the picker: the first slugs ``user`` sees, whether they fit a
    <select>, and the slug chosen (kept as typed, even one the person cannot see)."""
    slugs = list(Team.objects.visible_to(user).order_by("slug").values_list("slug", flat=True)[:TEAM_SELECT_MAX + 1])
    return {"team_slugs": slugs, "team_as_select": len(slugs) <= TEAM_SELECT_MAX, "chosen_team": chosen}


def suggestions(user, typed: str) -> list[str]:
    """The first slugs ``user`` sees that start with what was typed."""
    typed = typed.strip().lower()[:100]
    teams = Team.objects.visible_to(user)
    if typed:
        teams = teams.filter(slug__startswith=typed)
    return list(teams.order_by("slug").values_list("slug", flat=True)[:TEAM_SUGGESTIONS])


def answer_suggestions(request):
    """The suggestions when ``request`` is the picker input's htmx call; None otherwise."""
    if not (request.htmx and request.htmx.target == SUGGESTIONS_TARGET):
        return None
    return render(request, "partials/team_options.html",
                  {"slugs": suggestions(request.user, request.GET.get("team", ""))})
