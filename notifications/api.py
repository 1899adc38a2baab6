"""REST API for notifications: your email preferences, and your teams' webhooks with their
delivery log (owners only). Tokens may read; changes need a signed-in session, so a CI
token cannot redirect a team's events. A webhook's signing secret is in one answer only:
the one that made it, or that rotated it (both session only); every answer of the
webhooks' routes carries ``Cache-Control: no-store``."""

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.utils.cache import add_never_cache_headers
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, Throttled
from rest_framework.response import Response

from core.api_errors import NON_FIELD, RefuseNulMixin
from core.api_fields import StrictFields
from tenants.auth import token_of
from tenants.scoping import TeamField, TeamScopedViewSet

from . import actions
from .models import CHOOSABLE, DEFAULT_ON, Preference, Webhook, WebhookDelivery, audience


class PreferenceSerializer(StrictFields, serializers.Serializer):
    kind = serializers.ChoiceField(choices=[(k.value, k.label) for k in CHOOSABLE], read_only=True)
    label = serializers.CharField(read_only=True)
    audience = serializers.CharField(read_only=True, help_text="Who hears of this kind of event.")
    email = serializers.BooleanField(help_text="Whether you get it by email.")
    default = serializers.BooleanField(read_only=True)


def _preferences(user) -> list[dict]:
    chosen = Preference.objects.effective(user)
    return [{"kind": k.value, "label": k.label, "audience": audience(k), "email": chosen[k.value],
             "default": k in DEFAULT_ON} for k in CHOOSABLE]


class SessionWrites:
    """Reads with a token; writes from a signed-in session only."""

    def check_session(self, request):
        if token_of(request) is not None:
            raise PermissionDenied("Change notification settings from a signed-in session, not with a token.")


class PreferenceViewSet(SessionWrites, RefuseNulMixin, viewsets.ViewSet):
    """Your email preferences, one entry per kind of event."""

    lookup_field = "kind"
    lookup_value_regex = r"[a-z_]+\.[a-z_]+"
    serializer_class = PreferenceSerializer

    @extend_schema(responses={200: PreferenceSerializer(many=True)})
    def list(self, request):
        return Response(_preferences(request.user))

    @extend_schema(request=PreferenceSerializer, responses={200: PreferenceSerializer})
    def partial_update(self, request, kind=None):
        self.check_session(request)
        if kind not in CHOOSABLE:
            raise NotFound(f"Unknown kind of event {kind!r}.")
        form = PreferenceSerializer(data=request.data, partial=True)  # {} changes nothing
        form.is_valid(raise_exception=True)
        if "email" in form.validated_data:
            Preference.objects.choose(request.user, kind, form.validated_data["email"])
        return Response(next(p for p in _preferences(request.user) if p["kind"] == kind))


class WebhookSerializer(StrictFields, serializers.ModelSerializer):
    team = TeamField()
    kinds = serializers.ListField(child=serializers.ChoiceField(choices=[k.value for k in CHOOSABLE]),
                                  allow_empty=False, max_length=len(CHOOSABLE),
                                  help_text="Each kind of event once.")
    previous_secret_until = serializers.DateTimeField(
        source="previous_signs_until", read_only=True, help_text="After a rotation that kept the previous secret: it signs beside the new one "
        "until then. Null otherwise.")

    class Meta:
        model = Webhook
        fields = ["id", "team", "url", "kinds", "is_active", "previous_secret_until", "created_at"]
        read_only_fields = ["id", "previous_secret_until", "created_at"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance is not None:
            self.fields["team"].read_only = True

    def validate_team(self, team):
        if not Webhook.can_manage(team, self.context["request"].user):
            raise serializers.ValidationError(f"Only owners of {team.slug} manage its webhooks.")
        return team

    def validate(self, attrs):
        # The model's rules, with its messages: the URL's address policy, known kinds.
        current = {f: getattr(self.instance, f) for f in ("team", "url", "kinds", "is_active")} if self.instance else {}
        hook = Webhook(**{**current, **attrs})
        hook._state.adding = self.instance is None  # the team's cap is for new ones
        try:
            hook.full_clean(exclude=["secret", "created_by", "team"])
        except DjangoValidationError as err:  # a rule of the whole webhook (the team's cap) is no field's
            raise serializers.ValidationError({NON_FIELD if name == NON_FIELD_ERRORS else name: messages
                                               for name, messages in err.message_dict.items()}) from None
        return attrs


class WebhookWithSecretSerializer(WebhookSerializer):
    """A webhook as made or rotated: the one answer that holds its secret."""

    secret = serializers.CharField(read_only=True, help_text="Signs every request (X-GPUPlatform-Signature). "
                                   "Shown in this answer only: keep it now.")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]
        read_only_fields = [*WebhookSerializer.Meta.read_only_fields, "secret"]


class RotateSerializer(StrictFields, serializers.Serializer):
    keep_previous = serializers.BooleanField(
        default=False, help_text="Keep signing with the current secret too, beside the new one, for "
        "WEBHOOK_SECRET_GRACE_HOURS (a planned change). False (the default): it stops at once (a leak).")


class DeliverySerializer(serializers.ModelSerializer):
    kind = serializers.CharField(source="event.kind", read_only=True)
    title = serializers.CharField(source="event.title", read_only=True)
    status = serializers.CharField(read_only=True, help_text="pending, succeeded or failed.")
    log = serializers.ListField(child=serializers.DictField(), read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = ["id", "kind", "title", "is_resend", "status", "attempts", "status_code", "error", "log",
                  "next_attempt_at", "created_at", "delivered_at"]
        read_only_fields = fields


class WebhookViewSet(SessionWrites, TeamScopedViewSet, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                     mixins.CreateModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin):
    """Webhooks of the teams you own, their delivery log, and resending a delivery."""

    rows = Webhook.objects.managed_by  # owners only: a webhook holds its signing secret
    serializer_class = WebhookSerializer
    queryset = Webhook.objects.none()  # for the schema; rows and refine are the truth
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def refine(self, hooks):
        return hooks.select_related("team").distinct()

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        add_never_cache_headers(response)  # no cache on the way keeps a webhook (or its secret)
        return response

    @extend_schema(responses={201: WebhookWithSecretSerializer})
    def create(self, request, *args, **kwargs):
        self.check_session(request)
        form = self.get_serializer(data=request.data)
        form.is_valid(raise_exception=True)
        hook = form.save(created_by=request.user)
        return Response(WebhookWithSecretSerializer(hook, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

    def perform_update(self, serializer):
        self.check_session(self.request)
        serializer.save()

    def perform_destroy(self, instance):
        self.check_session(self.request)
        instance.delete()

    @extend_schema(request=RotateSerializer, responses={200: WebhookWithSecretSerializer})
    @action(detail=True, methods=["post"], url_path="rotate-secret")
    def rotate_secret(self, request, pk=None):
        """A new signing secret, in this answer only."""
        self.check_session(request)
        hook = self.get_object()
        form = RotateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        hook.rotate_secret(keep_previous=form.validated_data["keep_previous"])
        return Response(WebhookWithSecretSerializer(hook, context=self.get_serializer_context()).data)

    @extend_schema(responses={200: DeliverySerializer(many=True)})
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None):
        hook = self.get_object()
        page = self.paginate_queryset(hook.deliveries.select_related("event").order_by("-id"))
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)

    @extend_schema(request=None, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"], url_path=r"deliveries/(?P<delivery_id>\d+)/resend")
    def resend(self, request, pk=None, delivery_id=None):
        self.check_session(request)
        hook = self.get_object()
        delivery = hook.deliveries.select_related("event", "webhook").filter(pk=delivery_id).first()
        if delivery is None:
            raise NotFound("No such delivery of this webhook.")
        try:
            with transaction.atomic():
                again = actions.resend(delivery)
        except actions.TooManyByHand as err:
            raise Throttled(wait=err.wait, detail=str(err)) from None
        return Response(DeliverySerializer(again).data, status=status.HTTP_202_ACCEPTED)

