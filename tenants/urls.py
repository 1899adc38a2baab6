"""Team pages (browser)."""

from django.urls import path

from . import views

app_name = "tenants"

urlpatterns = [
    path("<slug:slug>/", views.team_detail, name="detail"),
    path("<slug:slug>/members/", views.member_add, name="member-add"),
    path("<slug:slug>/members/<int:pk>/remove/", views.member_remove, name="member-remove"),
]
