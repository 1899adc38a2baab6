"""A team's volumes, created and deleted from its page by owners (and quota managers) through
`jobs.actions`; what the page shows of them is `views.team_volumes_context`."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from jobs import actions as job_actions
from jobs.forms import VolumeForm
from jobs.models import Volume
from tenants.models import Team

from .views import _team, _team_page


def _back(request, team: Team, **kwargs):
    if request.htmx or kwargs.get("status", 200) != 200:
        return _team_page(request, team, **kwargs)
    return redirect("console:team", slug=team.slug)


@login_required
@require_POST
def volume_create(request, slug):
    team = _team(request, slug)
    if not Volume.can_manage(team, request.user):
        raise PermissionDenied(f"Only owners of {team.slug} create its volumes.")
    form = VolumeForm(request.POST, team=team)
    if form.is_valid():
        try:
            volume = job_actions.create_volume(team=team, user=request.user, **form.cleaned_data)
        except ValidationError as err:
            for field, errors in err.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Created volume {volume.name} ({volume.size_gib} GiB of "
                                      f"{volume.storage_class}).")
            return _back(request, team)
    return _back(request, team, volume_form=form, status=400)


@login_required
@require_POST
def volume_delete(request, slug, pk):
    team = _team(request, slug)
    if not Volume.can_manage(team, request.user):
        raise PermissionDenied(f"Only owners of {team.slug} delete its volumes.")
    volume = get_object_or_404(team.volumes, pk=pk)
    try:
        job_actions.delete_volume(volume, request.user)
    except ValidationError as err:
        messages.error(request, err.messages[0])
        return _back(request, team, status=409)
    messages.success(request, f"Deleted volume {volume.name}; its data goes with it.")
    return _back(request, team)
