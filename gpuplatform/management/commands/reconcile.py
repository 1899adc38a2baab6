"""Reconcile now, in this process, and print what was applied and pruned."""

from django.core.management.base import BaseCommand, CommandError

from cluster import ClusterError
from gpuplatform.reconcile import NoCluster, Outcome, current_cluster
from jobs.models import Job
from jobs.tasks import sync_job
from quotas.tasks import sync_cluster_objects
from tenants.models import Team
from tenants.tasks import sync_team


class Command(BaseCommand):
    help = "Apply the desired state to the cluster: --all, --team SLUG or --job ID."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--all", action="store_true", help="cluster-wide objects, every team, every live job")
        which.add_argument("--team", metavar="SLUG")
        which.add_argument("--job", metavar="ID", type=int)

    def handle(self, *args, all: bool, team: str | None, job: int | None, **options):
        try:
            cluster = current_cluster()
        except NoCluster as err:
            raise CommandError(str(err)) from None
        cluster.reset_counts()
        steps = self._plan(all, team, job)
        outcome = Outcome()
        for number, (label, step) in enumerate(steps, 1):
            self.stdout.write(f"[{number}/{len(steps)}] {label}")
            try:
                result = step(cluster)
            except ClusterError as err:
                self.stderr.write(self.style.ERROR(f"    failed: {err}"))
                continue
            for line in result.lines():
                self.stdout.write(f"    {line}")
            outcome += result
        unchanged = len(outcome.applied) - sum(r.wrote for r in outcome.applied)
        counts = ", ".join(f"{verb} {n}" for verb, n in sorted(cluster.requests.items())) or "none"
        self.stdout.write(self.style.SUCCESS(
            f"{outcome.writes} writes ({unchanged} objects already up to date, {len(outcome.pruned)} pruned); "
            f"API requests: {counts}"
        ))

    def _plan(self, everything: bool, slug: str | None, job_id: int | None) -> list:
        jobs = Job.objects.select_related("team", "flavor", "priority")
        if slug:
            team = Team.objects.filter(slug=slug).first()
            if team is None:
                raise CommandError(f"No team {slug!r}.")
            return [(f"team {slug}", lambda c: sync_team(c, team))]
        if job_id:
            job = jobs.filter(pk=job_id).first()
            if job is None:
                raise CommandError(f"No job {job_id}.")
            return [(f"job {job}", lambda c: sync_job(c, job))]
        steps = [("cluster-wide objects", sync_cluster_objects)]
        steps += [(f"team {t.slug}", lambda c, t=t: sync_team(c, t)) for t in Team.objects.all()]
        live = jobs.live().exclude(state=Job.State.DRAFT)
        steps += [(f"job {j}", lambda c, j=j: sync_job(c, j)) for j in live]
        return steps
