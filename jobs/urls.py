"""Job pages (browser): the list and submission (`jobs.web.views`), a job's own page (`jobs.web.pages`)."""

from django.urls import path

from .web import pages, views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="list"),
    path("new/", views.job_submit, name="submit"),
    path("new/preview/", views.job_preview, name="preview"),
    path("<int:pk>/", pages.job_detail, name="detail"),
    path("<int:pk>/pods/", pages.job_pods, name="pods"),
    path("<int:pk>/gpus/", pages.job_gpus, name="gpus"),
    path("<int:pk>/logs/", pages.job_logs, name="logs"),
    path("<int:pk>/logs/download/", pages.job_log_download, name="log_download"),
    path("<int:pk>/cancel/", pages.job_cancel, name="cancel"),
    path("<int:pk>/stop/", pages.job_stop, name="stop"),
    path("<int:pk>/start/", pages.job_start, name="start"),
    path("<int:pk>/exempt-idle/", pages.job_exempt_idle, name="exempt_idle"),
    path("<int:pk>/submit/", pages.job_submit_draft, name="submit_draft"),
]
