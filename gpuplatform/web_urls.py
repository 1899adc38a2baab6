"""Browser routes: login, dashboard, jobs, teams and quotas (htmx pages)."""

from django.urls import include, path

from accounts import views as accounts_views
from console.views import dashboard

urlpatterns = [
    path("", dashboard, name="dashboard"),
    # Password and SSO login, and logout (at the IdP too after an SSO login): accounts/.
    path("login/", accounts_views.LoginView.as_view(), name="login"),
    path("logout/", accounts_views.LogoutView.as_view(), name="logout"),
    # mozilla-django-oidc's routes: /oidc/authenticate/, /oidc/callback/, /oidc/logout/.
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("", include("accounts.urls")),
    path("jobs/", include("jobs.urls")),
    path("notifications/", include("notifications.urls")),
    path("", include("console.urls")),
]
