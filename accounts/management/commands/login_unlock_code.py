"""Print a one-time code that, typed into the login form with the right password, clears
a user name's login lock (accounts.lockout). Run it where the platform runs, e.g.
``kubectl exec deploy/gpuplatform-web -- python manage.py login_unlock_code admin``."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.lockout import issue_unlock_code


class Command(BaseCommand):
    help = "Print a one-time login unlock code for USERNAME (valid LOGIN_UNLOCK_CODE_MINUTES)."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username, **options):
        if not get_user_model().objects.filter(username=username).exists():
            raise CommandError(f"No account is named {username}.")
        code = issue_unlock_code(username)
        self.stdout.write(code)
        self.stderr.write(f"Valid {settings.LOGIN_UNLOCK_CODE_MINUTES} minutes, once: type it under "
                          "'Unlock code' on the login page with the password of " + username + ".")
