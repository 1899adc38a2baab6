"""GPU-hours (and cost) of one month: a summary per team, flavor and user, or the CSV."""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from console import accounting
from tenants.models import Team


class Command(BaseCommand):
    help = "GPU-hours per team, flavor and user for a month, from the jobs' admitted time."

    def add_arguments(self, parser):
        parser.add_argument("--month", default=None, help="YYYY-MM (default: this month, in TIME_ZONE)")
        parser.add_argument("--team", action="append", default=[], help="only this team's slug (repeatable)")
        parser.add_argument("--format", choices=["summary", "csv"], default="summary",
                            help="summary (default) or csv: one row per day, team, flavor and user")

    def handle(self, *args, month, team, format, **options):
        month = month or timezone.localdate().strftime("%Y-%m")
        try:
            start, end = accounting.month_window(month)
        except ValueError as err:
            raise CommandError(str(err)) from None
        teams = None
        if team:
            teams = Team.objects.filter(slug__in=team)
            missing = sorted(set(team) - set(teams.values_list("slug", flat=True)))
            if missing:
                raise CommandError(f"No team called {', '.join(missing)}.")
        rows = accounting.usage_rows(start, end, teams=teams)
        if format == "csv":
            accounting.write_csv(rows, self.stdout)
            return
        total = sum((r.gpu_hours for r in rows), start=accounting.Decimal(0))
        self.stdout.write(f"GPU-hours in {month} ({timezone.get_default_timezone_name()}): {total}")
        for key in ("team", "flavor", "user"):
            self.stdout.write(f"\nper {key}:")
            for name, hours, cost in accounting.totals(rows, key):
                self.stdout.write(f"  {name:<24} {hours:>10} GPU-h" + ("" if cost is None else f"  cost {cost}"))
