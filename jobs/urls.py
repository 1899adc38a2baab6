"""Job pages (browser)."""

from django.urls import path

from . import views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="list"),
    path("new/", views.job_submit, name="submit"),
    path("new/preview/", views.job_preview, name="preview"),
    path("<int:pk>/", views.job_detail, name="detail"),
    path("<int:pk>/pods/", views.job_pods, name="pods"),
    path("<int:pk>/cancel/", views.job_cancel, name="cancel"),
]
