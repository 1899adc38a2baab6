"""Notification pages: a person's email preferences and recent notifications, the
unsubscribe link of an email (no sign-in needed), and a team's webhooks with their
delivery log (owners only; others of the team get 403, outsiders 404).

A webhook's secret is shown once: the page after it was made or rotated takes it from the
session (where the POST put it) and forgets it; every webhook page is ``no-store``."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from tenants.models import Team

from . import actions
from .forms import PreferenceForm, WebhookForm
from .messages import read_unsubscribe_token
from .models import Kind, Notification, Preference, Webhook, WebhookDelivery

RECENT = 20
LOG = 50


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request):
    current = Preference.objects.effective(request.user)
    form = PreferenceForm(request.POST or None, initial_choices=current)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            for kind, email in form.choices().items():
                if current[kind] != email:
                    Preference.objects.choose(request.user, kind, email)
            messages.success(request, "Saved your email preferences.")
            if not request.htmx:
                return redirect("notifications:preferences")
            form = PreferenceForm(initial_choices=Preference.objects.effective(request.user))
        else:
            status = 400
    context = {"form": form, "recent": Notification.objects.filter(user=request.user)
               .select_related("event")[:RECENT], "has_email": bool(request.user.email)}
    if request.htmx:
        return render(request, "notifications/partials/preferences_form.html", context, status=status)
    return render(request, "notifications/preferences.html", context, status=status)


# One-click unsubscribe (RFC 8058): mail clients POST without a session or CSRF token; the
# signed token is the authority, and it can only turn one kind of email off.
@csrf_exempt
@require_http_methods(["GET", "POST"])
def unsubscribe(request, token):
    found = read_unsubscribe_token(token)
    person = get_user_model().objects.filter(pk=found[0]).first() if found else None
    if person is None:
        raise Http404("This unsubscribe link is not valid.")
    kind = Kind(found[1])
    done = request.method == "POST"
    if done:
        Preference.objects.choose(person, kind, False)
    return render(request, "notifications/unsubscribe.html", {"kind": kind, "done": done, "token": token})


def _owned_team(request, slug) -> Team:
    team = get_object_or_404(Team.objects.visible_to(request.user), slug=slug)
    if not Webhook.can_manage(team, request.user):
        raise PermissionDenied("Only the team's owners manage its webhooks.")
    return team


def _hook(request, slug, pk) -> Webhook:
    team = _owned_team(request, slug)
    return get_object_or_404(Webhook.objects.filter(team=team).select_related("team"), pk=pk)


@login_required
@require_http_methods(["GET", "POST"])
def webhook_list(request, slug):
    team = _owned_team(request, slug)
    form = WebhookForm(request.POST or None, team=team)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            form.instance.created_by = request.user
            try:
                hook = form.save()
            except ValidationError as err:  # another took the team's last place (MAX_WEBHOOKS_PER_TEAM)
                form.add_error(None, err)
            else:
                _show_secret_once(request, hook)
                messages.success(request, f"Added a webhook for {team.slug}; copy its secret now, it is shown once.")
                return redirect("notifications:webhook", slug=team.slug, pk=hook.pk)
        status = 400
    hooks = list(team.webhooks.all())
    return _no_store(render(request, "notifications/webhooks.html", {"team": team, "hooks": hooks, "form": form},
                            status=status))


SECRET_KEY = "notifications:new-webhook-secret"


def _show_secret_once(request, hook) -> None:
    request.session[SECRET_KEY] = {"id": hook.pk, "secret": hook.secret}


def _secret_to_show(request, hook) -> str | None:
    kept = request.session.get(SECRET_KEY)
    if not kept or kept.get("id") != hook.pk:
        return None
    del request.session[SECRET_KEY]
    return kept["secret"]


def _no_store(response):
    add_never_cache_headers(response)
    return response


@login_required
@require_http_methods(["GET", "POST"])
def webhook_detail(request, slug, pk):
    hook = _hook(request, slug, pk)
    form = WebhookForm(request.POST or None, instance=hook, team=hook.team)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            form.save()
            messages.success(request, "Saved the webhook.")
            return redirect("notifications:webhook", slug=slug, pk=hook.pk)
        status = 400
    deliveries = list(hook.deliveries.select_related("event")[:LOG])
    context = {"team": hook.team, "hook": hook, "form": form, "deliveries": deliveries,
               "live": any(d.status == WebhookDelivery.Status.PENDING for d in deliveries)}
    if request.htmx and request.htmx.target == "deliveries":
        return render(request, "notifications/partials/deliveries.html", context)
    context["new_secret"] = _secret_to_show(request, hook)
    context["grace_hours"] = settings.WEBHOOK_SECRET_GRACE_HOURS
    return _no_store(render(request, "notifications/webhook_detail.html", context, status=status))


@login_required
@require_POST
def webhook_rotate(request, slug, pk):
    hook = _hook(request, slug, pk)
    keep = request.POST.get("keep_previous") == "on"
    hook.rotate_secret(keep_previous=keep)
    _show_secret_once(request, hook)
    messages.success(request, "A new secret signs from now on" + (
        f"; the previous one signs beside it for {settings.WEBHOOK_SECRET_GRACE_HOURS} h." if keep else
        "; the previous one no longer does."))
    return redirect("notifications:webhook", slug=slug, pk=hook.pk)


@login_required
@require_POST
def webhook_delete(request, slug, pk):
    hook = _hook(request, slug, pk)
    hook.delete()
    messages.success(request, f"Removed the webhook to {hook.url}.")
    return redirect("notifications:webhooks", slug=slug)


@login_required
@require_POST
def webhook_ping(request, slug, pk):
    hook = _hook(request, slug, pk)
    try:
        actions.ping_webhook(hook, request.user)
    except actions.TooManyByHand as err:
        messages.error(request, str(err))
    else:
        messages.success(request, "Sent a test event; it appears in the log below.")
    return redirect("notifications:webhook", slug=slug, pk=hook.pk)


@login_required
@require_POST
def delivery_resend(request, slug, pk, delivery_pk):
    hook = _hook(request, slug, pk)
    delivery = get_object_or_404(hook.deliveries.select_related("event", "webhook"), pk=delivery_pk)
    try:
        actions.resend(delivery)
    except actions.TooManyByHand as err:
        messages.error(request, str(err))
    else:
        messages.success(request, f"Sending {delivery.event.kind} again.")
    if request.htmx:
        return webhook_detail_fragment(request, hook)
    return redirect("notifications:webhook", slug=slug, pk=hook.pk)


def webhook_detail_fragment(request, hook):
    deliveries = list(hook.deliveries.select_related("event")[:LOG])
    return render(request, "notifications/partials/deliveries.html", {
        "team": hook.team, "hook": hook, "deliveries": deliveries,
        "live": any(d.status == WebhookDelivery.Status.PENDING for d in deliveries)})

