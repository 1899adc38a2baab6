"""Admin views of notifications: what was recorded and delivered (read-only), and webhooks."""

from django.contrib import admin

from .models import Event, Notification, Webhook, WebhookDelivery


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Event)
class EventAdmin(ReadOnly):
    list_display = ["created_at", "kind", "title", "team"]
    list_filter = ["kind"]
    search_fields = ["title", "key"]
    list_select_related = ["team"]


@admin.register(Notification)
class NotificationAdmin(ReadOnly):
    list_display = ["created_at", "user", "event", "status", "in_digest", "sent_at"]
    list_filter = ["status"]
    list_select_related = ["user", "event"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["team", "url", "is_active", "created_at"]
    list_select_related = ["team"]
    exclude = ["secret"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnly):
    list_display = ["created_at", "webhook", "status", "attempts", "status_code"]
    list_filter = ["status"]
    list_select_related = ["webhook__team", "event"]
