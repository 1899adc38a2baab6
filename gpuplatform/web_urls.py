"""Browser routes: login, dashboard, jobs, teams and quotas (htmx pages)."""

from django.contrib.auth import views as auth_views
from django.urls import include, path

from console.views import dashboard

urlpatterns = [
    path("", dashboard, name="dashboard"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("jobs/", include("jobs.urls")),
    path("", include("console.urls")),
]
