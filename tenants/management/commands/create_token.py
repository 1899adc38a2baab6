"""``python manage.py create_token USER [--team SLUG] [--scopes ...] [--expires DAYS]``:
issue an API token and print it (the only time it is shown)."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from tenants.models import Team
from tenants.tokens import ALL_SCOPES, ApiToken


class Command(BaseCommand):
    help = "Create an API token for a user and print it once."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--team", help="Slug of the one team the token acts for (default: all of the user's).")
        parser.add_argument("--scopes", nargs="+", choices=ALL_SCOPES, default=None,
                            help="What the token may do (default: every scope the user can use).")
        parser.add_argument("--expires", type=int, default=90, metavar="DAYS", help="Lifetime in days (default 90).")
        parser.add_argument("--name", default="", help="What the token is for (default: 'created by create_token').")

    def handle(self, username, team, scopes, expires, name, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        if not 1 <= expires <= 3650:
            raise CommandError("--expires takes 1 to 3650 days.")
        team_obj = None
        if team:
            team_obj = Team.objects.filter(slug=team).first()
            if team_obj is None:
                raise CommandError(f"No team {team!r}.")
        try:
            token, secret = ApiToken.objects.issue(
                user=user, team=team_obj, scopes=scopes, name=name or "created by create_token",
                lifetime=timedelta(days=expires),
            )
        except PermissionDenied as err:
            raise CommandError(str(err)) from err
        except ValidationError as err:  # the scopes, or one token more than MAX_API_TOKENS_PER_USER
            raise CommandError(" ".join(err.messages)) from err
        self.stderr.write(
            f"Token {token.prefix}… for {user.username} ({team or 'all teams'}; {', '.join(token.scopes)}), "
            f"expires {token.expires_at:%Y-%m-%d}. It is shown only now:"
        )
        self.stdout.write(secret)
