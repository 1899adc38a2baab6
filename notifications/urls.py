"""Browser routes of notifications: preferences, unsubscribe, team webhooks."""

from django.urls import path

from . import views

app_name = "notifications"
urlpatterns = [
    path("", views.preferences, name="preferences"),
    path("unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
    path("teams/<slug:slug>/webhooks/", views.webhook_list, name="webhooks"),
    path("teams/<slug:slug>/webhooks/<int:pk>/", views.webhook_detail, name="webhook"),
    path("teams/<slug:slug>/webhooks/<int:pk>/delete/", views.webhook_delete, name="webhook-delete"),
    path("teams/<slug:slug>/webhooks/<int:pk>/ping/", views.webhook_ping, name="webhook-ping"),
    path("teams/<slug:slug>/webhooks/<int:pk>/rotate/", views.webhook_rotate, name="webhook-rotate"),
    path("teams/<slug:slug>/webhooks/<int:pk>/deliveries/<int:delivery_pk>/resend/", views.delivery_resend,
         name="delivery-resend"),
]
