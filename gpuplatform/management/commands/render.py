"""Print the YAML the platform would apply, kubectl-ready (multi-document)."""

import yaml
from django.core.management.base import BaseCommand, CommandError

from jobs.manifests import render_job
from jobs.models import Job
from quotas.manifests import render_cluster, render_team_quotas
from quotas.models import Cohort, GpuFlavor, PriorityClass, Quota
from tenants.manifests import render_team
from tenants.models import Team


class Command(BaseCommand):
    help = "Render cluster objects as YAML: `render cluster`, `render team SLUG`, `render job ID`."

    def add_arguments(self, parser):
        parser.add_argument("what", choices=["cluster", "team", "job"])
        parser.add_argument("key", nargs="?", help="team slug or job id")

    def handle(self, *args, what, key, **options):
        if what == "cluster":
            objects = render_cluster(list(GpuFlavor.objects.all()), list(Cohort.objects.all()),
                                     list(PriorityClass.objects.all()))
        elif what == "team":
            team = self._get(Team.objects, slug=key, what="team")
            objects = (render_team(team, list(team.memberships.select_related("user", "user__oidc_identity")),
                                   list(team.group_mappings.all()))
                       + render_team_quotas(team, list(Quota.objects.of_team(team))))
        else:
            if not (key or "").isdigit():
                raise CommandError("render job needs the job's numeric id.")
            job = self._get(Job.objects.select_related("team", "flavor", "priority"), pk=key, what="job")
            objects = render_job(job)
        self.stdout.write(yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True), ending="")

    @staticmethod
    def _get(queryset, *, what: str, **lookup):
        if not any(lookup.values()):
            raise CommandError(f"render {what} needs a {'slug' if what == 'team' else 'id'}.")
        try:
            return queryset.get(**lookup)
        except queryset.model.DoesNotExist:
            raise CommandError(f"No {what} {next(iter(lookup.values()))!r}.") from None
