"""Notebooks (workloads/notebook.py, workloads/kinds/notebook.py, jobs/models/notebook.py): what they
render for Kueue's StatefulSet integration, what a person may ask (the team's own quota only),
stop and start, the lifetime, and how the cluster's words become "notebook ready" or "stopped"."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from jobs.lifecycle import State
from jobs.manifests import job_fields, render_job
from jobs.models import Job
from quotas.models import Cohort
from tenants.models import Membership
from workloads import Phase
from workloads.kinds import for_job
from workloads.kueue import PRIORITY_LABEL, PROTECTED_PRIORITY_CLASS, QUEUE_LABEL
from workloads.notebook import observe_notebook

from ..builders import build_job, make_flavor, make_job, make_quota, make_team, make_user
from ..schemas import validate
from ..security import assert_hardened

pytestmark = pytest.mark.django_db

NOTEBOOK = dict(kind=Job.Kind.NOTEBOOK, image="quay.io/jupyter/pytorch-notebook:cuda12-2025-10-20", command=[],
                args=[], env={})


@pytest.fixture
def team():
    return make_team("nblab")


@pytest.fixture
def flavor(team):
    flavor = make_flavor("h100")
    make_quota(team, flavor, nominal_gpus=4)
    return flavor


def notebook(team, flavor, **fields):
    return make_job(team, flavor, **{**NOTEBOOK, "gpus_per_worker": 1, **fields})


def by_kind(objects) -> dict:
    """Each object by its kind; the headless Service apart from the one people reach."""
    headless = lambda obj: obj["kind"] == "Service" and obj["spec"].get("clusterIP") == "None"  # noqa: E731
    return {obj["kind"] + ("/headless" if headless(obj) else ""): obj for obj in objects}


# --- rendering ----------------------------------------------------------------------------------
def test_a_notebook_is_a_queued_one_replica_statefulset_under_the_protected_class_with_a_service(team, flavor):
    job = notebook(team, flavor, gpus_per_worker=2, volumes={})
    objects = by_kind(render_job(job))
    assert set(objects) == {"StatefulSet", "Service", "Service/headless"}  # no Ingress without a host pattern
    sts, service = objects["StatefulSet"], objects["Service"]
    assert sts["metadata"]["labels"][QUEUE_LABEL] == "h100"
    assert sts["metadata"]["labels"][PRIORITY_LABEL] == PROTECTED_PRIORITY_CLASS  # never preempted for priority
    assert sts["spec"]["replicas"] == 1 and "volumeClaimTemplates" not in sts["spec"]
    [main] = sts["spec"]["template"]["spec"]["containers"]
    assert main["ports"] == [{"name": "http", "containerPort": 8888}] and main["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["ports"][0]["port"] == 8888
    for obj in (sts, service):
        validate(obj)
    assert assert_hardened([sts], job) == 1


def test_a_notebooks_statefulset_is_governed_by_a_headless_service_apart_from_the_one_people_reach(team, flavor):
    job = notebook(team, flavor)
    objects = by_kind(render_job(job))
    sts, service, governing = objects["StatefulSet"], objects["Service"], objects["Service/headless"]
    assert sts["spec"]["serviceName"] == governing["metadata"]["name"] != service["metadata"]["name"]
    assert governing["spec"]["clusterIP"] == "None" and "type" not in governing["spec"]
    assert governing["spec"]["selector"] == service["spec"]["selector"] == sts["spec"]["selector"]["matchLabels"]
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert governing["spec"]["selector"].items() <= pod_labels.items()
    # The Service people reach (port-forward, the Ingress) is the ClusterIP one, as before.
    assert for_job(job).endpoint(job)["service"] == service["metadata"]["name"]
    validate(governing)


def test_a_notebook_with_a_volume_at_home_mounts_the_teams_claim(team, flavor):
    from jobs.models import Volume

    Volume.objects.create(team=team, name="home", size_gib=10, storage_class="standard")
    job = notebook(team, flavor, volumes={"home": "/home/user"})
    sts = by_kind(render_job(job))["StatefulSet"]
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    claims = [v["persistentVolumeClaim"]["claimName"] for v in volumes.values() if "persistentVolumeClaim" in v]
    assert claims == ["home"]  # the claim of the team volume, named after it
    [main] = sts["spec"]["template"]["spec"]["containers"]
    assert "/home/user" in [m["mountPath"] for m in main["volumeMounts"]]
    validate(sts)


def test_a_stopped_notebook_renders_no_replica_and_keeps_its_objects(team, flavor):
    job = notebook(team, flavor)
    job.state = State.STOPPED
    objects = by_kind(render_job(job))
    assert objects["StatefulSet"]["spec"]["replicas"] == 0 and "Service" in objects
    assert job.cluster_plan() is Job.Plan.APPLY  # scaled to nothing, not removed


def test_an_ingress_comes_with_a_host_pattern(team, flavor, settings):
    settings.NOTEBOOK_INGRESS_HOST, settings.NOTEBOOK_INGRESS_CLASS = "{job}-{team}.notebooks.example.org", "nginx"
    job = notebook(team, flavor, port=8080)
    ingress = by_kind(render_job(job))["Ingress"]
    [rule] = ingress["spec"]["rules"]
    name = by_kind(render_job(job))["StatefulSet"]["metadata"]["name"]
    assert rule["host"] == f"{name}-nblab.notebooks.example.org" and ingress["spec"]["ingressClassName"] == "nginx"
    assert rule["http"]["paths"][0]["backend"]["service"] == {"name": name, "port": {"name": "http"}}
    validate(ingress)
    endpoint = for_job(job).endpoint(job)
    assert endpoint["url"] == f"https://{rule['host']}/" and endpoint["port_forward"].endswith("8080:8080")


def test_the_port_forward_line_reaches_the_notebooks_service(team, flavor):
    job = notebook(team, flavor)
    endpoint = for_job(job).endpoint(job)
    service = by_kind(render_job(job))["Service"]["metadata"]["name"]
    assert endpoint["port_forward"] == f"kubectl -n {team.namespace_name} port-forward service/{service} 8888:8888"
    assert "url" not in endpoint


def test_kueue_keeps_the_pod_template_and_the_replicas_are_ours(team, flavor):
    rules = job_fields(notebook(team, flavor))[("apps", "StatefulSet")]
    assert "spec.template" in rules.immutable and "spec.replicas" not in rules.paths


def test_a_notebooks_pod_pattern_matches_its_pod_only(team, flavor):
    import re

    job = notebook(team, flavor, name="nb")
    pattern = re.compile(for_job(job).pod_pattern(job))
    name = by_kind(render_job(job))["StatefulSet"]["metadata"]["name"]
    assert pattern.fullmatch(f"{name}-0") and not pattern.fullmatch(f"{name}-1-0")


# --- what a person may ask ----------------------------------------------------------------------
def test_a_notebook_takes_port_8888_unless_told(team, flavor):
    assert notebook(team, flavor).port == 8888


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"workers": 2}, "workers", "one pod"),
    ({"gpus_per_worker": 5}, "gpus_per_worker", "never on borrowed GPUs"),
])
def test_bad_notebook_settings_are_refused_on_their_field(team, flavor, fields, field, words):
    with pytest.raises(ValidationError) as err:
        build_job(team, flavor, **{**NOTEBOOK, **fields}).full_clean()
    assert words in " ".join(err.value.message_dict[field])


def test_a_notebook_on_a_volcano_flavor_is_refused_on_its_kind(team):
    volcano = make_flavor("a100", scheduler="volcano")
    make_quota(team, volcano, nominal_gpus=8)
    with pytest.raises(ValidationError) as err:
        build_job(team, volcano, **NOTEBOOK).full_clean()
    assert "Kueue flavors only" in err.value.message_dict["kind"][0]


def test_a_notebook_that_would_need_borrowed_gpus_is_refused_though_the_cohort_lends(team, flavor):
    cohort = Cohort.objects.create(name="shared")
    other = make_team("lender")
    make_quota(other, flavor, nominal_gpus=8, cohort=cohort)
    team.quotas.update(cohort=cohort)
    busy = make_job(team, flavor, workers=1, gpus_per_worker=3)
    Job.objects.filter(pk=busy.pk).update(state=State.RUNNING)
    with pytest.raises(ValidationError) as err:
        build_job(team, flavor, **{**NOTEBOOK, "gpus_per_worker": 2}).full_clean()
    assert "1 of its 4 GPUs are free and this one needs 2" in err.value.message_dict["gpus_per_worker"][0]
    notebook(team, flavor, gpus_per_worker=1)  # what fits the team's own quota is taken


def test_a_notebooks_max_runtime_is_its_lifetime_with_the_flavors_default_and_cap(team, flavor):
    flavor.default_max_runtime_seconds, flavor.max_runtime_cap_seconds = 3600, 7200
    flavor.save()
    assert notebook(team, flavor).max_runtime_seconds == 3600
    with pytest.raises(ValidationError) as err:
        build_job(team, flavor, **{**NOTEBOOK, "max_runtime_seconds": 9000}).full_clean()
    assert "cap of flavor h100" in err.value.message_dict["max_runtime_seconds"][0]


# --- stop and start -----------------------------------------------------------------------------
@pytest.fixture
def people(team):
    owner, member, outsider = make_user("nb-owner"), make_user("nb-member"), make_user("nb-outsider")
    Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    make_team("elsewhere").memberships.create(user=outsider, role=Membership.Role.OWNER)
    return owner, member, outsider


def test_owners_and_members_stop_and_start_a_notebook_and_outsiders_cannot(team, flavor, people):
    owner, member, outsider = people
    job = notebook(team, flavor)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
    job.refresh_from_db()
    with pytest.raises(PermissionDenied):
        job.request_stop(outsider)
    assert job.request_stop(member) and job.state == State.STOPPED and job.gpus_in_use == 0
    assert not job.can_stop(owner) and job.can_start(owner) and not job.can_start(outsider)
    with pytest.raises(PermissionDenied):
        job.request_start(outsider)
    assert job.request_start(owner) and job.state == State.SUBMITTED
    assert [e.to_state for e in job.events.order_by("id")][-2:] == [State.STOPPED, State.SUBMITTED]


def test_a_notebook_starts_again_only_within_the_teams_own_quota(team, flavor, people):
    owner = people[0]
    job = notebook(team, flavor, gpus_per_worker=2)
    Job.objects.filter(pk=job.pk).update(state=State.STOPPED)
    job.refresh_from_db()
    taker = make_job(team, flavor, workers=1, gpus_per_worker=3)
    Job.objects.filter(pk=taker.pk).update(state=State.ADMITTED)
    with pytest.raises(ValidationError) as err:
        job.request_start(owner)
    assert "1 of its 4 GPUs are free" in err.value.message_dict["gpus_per_worker"][0]
    job.refresh_from_db()
    assert job.state == State.STOPPED


def test_training_jobs_are_neither_stopped_nor_started(team, flavor, people):
    job = make_job(team, flavor)
    assert not job.can_stop(people[0]) and not job.can_start(people[0])
    with pytest.raises(PermissionDenied):
        job.request_stop(people[0])


def test_a_stopped_notebook_ignores_what_the_cluster_still_says_until_started(team, flavor):
    job = notebook(team, flavor)
    Job.objects.filter(pk=job.pk).update(state=State.STOPPED)
    job.refresh_from_db()
    assert not job.observe(State.QUEUED, reason="Queued", message="Waiting for the scheduler.")
    job.refresh_from_db()
    assert job.state == State.STOPPED


def test_a_notebook_past_its_lifetime_is_over(team, flavor):
    job = notebook(team, flavor, max_runtime_seconds=3600)
    job.state, job.run_admitted_at = State.RUNNING, timezone.now() - timedelta(hours=2)
    assert job.lifetime_over()
    job.run_admitted_at = timezone.now() - timedelta(minutes=5)
    assert not job.lifetime_over()


# --- what the cluster says ----------------------------------------------------------------------
def _workload(*conditions):
    return {"status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m,
                                       "lastTransitionTime": "2026-12-01T10:00:00Z"} for t, s, r, m in conditions]}}


def _sts(replicas=1, ready=0):
    return {"spec": {"replicas": replicas}, "status": {"readyReplicas": ready}}


@pytest.mark.parametrize(("state", "workload", "sts", "expected"), [
    ("submitted", None, _sts(), None),
    ("submitted", _workload(("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set main: "
                             "insufficient unused quota for nvidia.com/gpu in flavor h100, 1 more needed")),
     _sts(), (Phase.QUEUED, "WaitingForQuota")),
    ("queued", _workload(("QuotaReserved", "True", "QuotaReserved", ""), ("Admitted", "True", "Admitted", "")),
     _sts(ready=0), (Phase.ADMITTED, "Starting")),
    ("admitted", _workload(("QuotaReserved", "True", "QuotaReserved", ""), ("Admitted", "True", "Admitted", "")),
     _sts(ready=1), (Phase.RUNNING, "NotebookReady")),
    ("stopped", None, _sts(replicas=0), (Phase.STOPPED, "StopRequested")),
    ("submitted", None, _sts(replicas=0), None),  # started again, not applied yet
])
def test_the_cluster_says_queued_ready_or_stopped(team, flavor, state, workload, sts, expected):
    job = notebook(team, flavor)
    job.state, job.reason = state, "StopRequested" if state == "stopped" else ""
    seen = observe_notebook(job, workload, sts, [])
    assert (seen.state, seen.reason) == expected if expected else seen is None
    if expected and expected[1] == "NotebookReady":
        assert seen.message == "Notebook ready."


def test_a_stop_is_not_lost_when_the_watcher_moves_the_row_between_read_and_write(team, flavor, people):
    job = notebook(team, flavor)
    Job.objects.filter(pk=job.pk).update(state=State.QUEUED)
    stale = Job.objects.get(pk=job.pk)  # read while queued...
    Job.objects.get(pk=job.pk).observe(State.ADMITTED, reason="Admitted", message="")  # ...then admitted
    assert stale.request_stop(people[1])
    assert Job.objects.get(pk=job.pk).state == State.STOPPED
