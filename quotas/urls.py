"""Quota pages (browser)."""

from django.urls import path

from . import views

app_name = "quotas"

urlpatterns = [
    path("", views.quota_list, name="list"),
]
