"""The researcher's and the quota manager's journeys in a real browser, on the demo data
(``seed_demo``) with the local cluster: what each page says is what the cluster does.

- Submit page: a job too big for the team's queue is told how many jobs are ahead of it,
  and the demo's 32-GPU clip-sweep (it can never start) is not one of them.
- A job submitted from the page runs on the cluster: its pods appear and a real log line
  from the fake kubelet follows, without a click.
- An inference server of 1-3 replicas x 2 GPUs running one replica is 2 GPUs in use, not 6,
  and that is what its GPU intervals (the GPU-hours) count.
- The quota manager's approval page shows the effect: "N of M promised -> ...", M the
  cluster's GPUs of the flavor.
- Every page visited fits a phone (390 px).

The demo's teams, flavors, cohort and priority classes get a suffix unique to the run: other
sessions use the same cluster at the same time.
"""

import re
import uuid
from io import StringIO

import pytest
from django.core.management import call_command

from console.decision import effect_of
from jobs.lifecycle import State
from jobs.models import GpuInterval, Job
from jobs.tasks import sync_job
from quotas.models import Cohort, GpuFlavor, PriorityClass, QuotaRequest
from quotas.tasks import sync_cluster_objects, sync_team_quotas
from tenants.models import Team
from tenants.tasks import offboard, sync_team

from ...support.browser import log_in, shot
from ...support.cluster import OUTLIVES_THE_TEST, wait_until
from ..cluster.test_what_ran_live import open_interval_gpus

pytestmark = [pytest.mark.browser, pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def fits_a_phone(page, name):
    page.wait_for_load_state()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} scrolls sideways ({width}px)"
    shot(page, f"journey-{name}")


def pods_of(live, job):
    return live.list("v1", "Pod", namespace=job.team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")


@pytest.fixture
def world(live):
    """seed_demo's data (test_browser's `page` builds on this `world`), its teams, flavors, cohort and priorities renamed for this run, on
    the cluster; at the end every job stopped, its pods gone, and the teams offboarded."""
    call_command("seed_demo", stdout=StringIO())
    run = uuid.uuid4().hex[:5]
    for model, field in ((Team, "slug"), (GpuFlavor, "name"), (Cohort, "name"), (PriorityClass, "name")):
        for obj in model.objects.all():
            model.objects.filter(pk=obj.pk).update(**{field: f"{getattr(obj, field)}-{run}"})
    teams = {team.slug.rsplit("-", 1)[0]: team for team in Team.objects.all()}
    flavors = {flavor.name.rsplit("-", 1)[0]: flavor for flavor in GpuFlavor.objects.all()}
    sync_cluster_objects(live)
    for team in teams.values():
        sync_team(live, team)
        sync_team_quotas(live, team)
    yield teams, flavors
    for job in Job.objects.exclude(state=State.DRAFT):
        while job.is_cancellable and not job.transition(State.CANCELLING, reason="CancelRequested"):
            job.refresh_from_db()
        if job.state == State.CANCELLING:
            sync_job(live, job)
    for team in teams.values():
        wait_until(lambda team=team: not live.list("v1", "Pod", namespace=team.namespace_name),
                   timeout=120, message=f"the pods of {team.slug} gone")
        team.refresh_from_db()
        offboard(live, team)
    Job.objects.all().delete()
    QuotaRequest.objects.all().delete()
    for flavor in flavors.values():
        flavor.quotas.all().delete()
        flavor.delete()
    PriorityClass.objects.all().delete()
    Cohort.objects.all().delete()
    sync_cluster_objects(live)


def test_the_researcher_and_the_quota_manager_see_on_the_demo_what_the_cluster_does(
        page, world, live, watcher, submit, no_reconcile):
    teams, flavors = world
    vision, nlp, h100 = teams["vision"], teams["nlp"], flavors["h100"]
    page.set_viewport_size(PHONE)
    log_in(page, "alice", "alice-demo-pass")
    fits_a_phone(page, "dashboard")

    # 1. The submit page: 16 of vision's 16 H100s are in use (vit-large-ddp); a 16-GPU job
    # queues with nobody ahead, the 32-GPU clip-sweep (more than the 24 it may ever use) not counted.
    page.goto(f"/jobs/new/?preset=single&team={vision.pk}")
    page.get_by_label("Team:").select_option(str(vision.pk))
    page.get_by_label("Flavor:").select_option(str(h100.pk))
    page.get_by_label("Workers:").fill("2")
    page.get_by_label("GPUs per worker:").fill("8")
    page.get_by_label("GPUs per worker:").press("Tab")
    page.get_by_text("Will queue: 0 jobs ahead, 16 of 16 GPUs in use.").wait_for()
    fits_a_phone(page, "submit-queues")
    page.get_by_label("Workers:").fill("1")
    page.get_by_label("GPUs per worker:").fill("1")
    page.get_by_label("Environment:").fill("\n".join(f"{k}={v}" for k, v in OUTLIVES_THE_TEST.items()))
    page.get_by_label("Environment:").press("Tab")
    page.get_by_text("Starts now if the cohort has 1 idle GPUs to lend (16 of 16 GPUs in use)").wait_for()

    # 2. Submit: the job page waits for pods, then shows them and a real log line, unclicked.
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    job = Job.objects.get(team=vision, name="train-single")
    pods = page.locator("#job-pods")
    pods.get_by_text("No pods for this job on the cluster yet.").wait_for()
    assert no_reconcile == [job.pk]
    sync_job(live, job)
    [pod] = wait_until(lambda: pods_of(live, job), timeout=120, message=f"the pods of {job.name}")
    pods.get_by_text(pod["metadata"]["name"]).wait_for(timeout=60_000)
    page.locator("#job-logs pre.logs").get_by_text(re.compile(r"epoch \d+/\d+ step \d+/\d+ loss")).first.wait_for(
        timeout=60_000)
    page.locator("#job-status h2").get_by_text("Running").wait_for(timeout=60_000)
    fits_a_phone(page, "job-running")

    # 3. nlp's server of 1-3 replicas x 2 GPUs runs one replica: 2 GPUs in use, not 6, and
    # its GPU interval (what the GPU-hours sum) is 2 GPUs.
    serve = submit(live, nlp, h100, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=3,
                   gpus_per_worker=2, readiness_path="/healthz", readiness_initial_delay_seconds=0,
                   env=OUTLIVES_THE_TEST)
    wait_until(lambda: open_interval_gpus(serve) == 2, timeout=120, message="the server's one replica counted")
    page.goto("/")
    page.get_by_text(re.compile(r"^2 in use / 8 quota")).wait_for()
    fits_a_phone(page, "dashboard-serving")
    page.goto(f"/jobs/{serve.pk}/")
    page.locator("#job-status h2").get_by_text("Running").wait_for()
    fits_a_phone(page, "job-serving")
    assert list(GpuInterval.objects.filter(job=serve).values_list("gpus", flat=True)) == [2]

    # 4. The researcher cancels her job; the cluster removes its pods.
    page.goto(f"/jobs/{job.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel job").click()
    page.locator("#job-status h2").get_by_text("Cancelling").wait_for()
    job.refresh_from_db()
    sync_job(live, job)
    wait_until(lambda: not pods_of(live, job), timeout=120, message=f"the pods of {job.name} gone")
    page.get_by_text("This job has ended; the page no longer refreshes.").wait_for(timeout=60_000)

    # 5. The quota manager opens vision's pending request: the effect on what is promised,
    # against the H100s the cluster has.
    page.context.clear_cookies()
    log_in(page, "quinn", "quinn-demo-pass")
    page.goto("/quotas/console/requests/")
    fits_a_phone(page, "requests")
    request = QuotaRequest.objects.get(team=vision, flavor=h100, status=QuotaRequest.Status.PENDING)
    page.goto(f"/quotas/console/requests/{request.pk}/")
    nodes = [n for n in live.list("v1", "Node")
             if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in h100.node_labels.items())]
    on_cluster = sum(int(n["status"]["allocatable"][h100.resource_name]) for n in nodes)
    promised = sum(h100.quotas.values_list("nominal_gpus", flat=True))
    after = effect_of(request).promised_after
    assert on_cluster > 0 and after != promised
    page.locator(".commitment").get_by_text(
        f"{promised} of {on_cluster} promised → {after} of {on_cluster}").wait_for()
    fits_a_phone(page, "request")
