"""The idle sweep (jobs/use/reclaim.py) on the in-memory cluster: warned, withdrawn, reclaimed,
paused; how each scheduler's workload is stopped; who may exempt a job. The live test is
tests/live/cluster/test_idle_reclaim_live.py."""

from datetime import UTC, datetime

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from cluster import FakeCluster, TransientError
from cluster.prometheus import Prometheus
from jobs.lifecycle import State
from jobs.manifests import render_job
from jobs.models import Job, JobEvent
from jobs.models.idle import CLEARED, EXEMPTED, RECLAIMED, WARNED, IdleWatch
from jobs.use import reclaim
from notifications.models import Event, Kind
from quotas.models import Action, IdlePolicy, Scheduler, Sharing
from tests.builders import make_flavor, make_job
from workloads.pods import object_name

W = 10
START = 1_800_000_000.0


@pytest.fixture(autouse=True)
def policy(settings):
    settings.IDLE_GPU_THRESHOLD_PERCENT = 5
    settings.IDLE_GPU_AFTER_SECONDS = 30
    settings.IDLE_GPU_GRACE_SECONDS = 30
    settings.IDLE_GPU_WINDOW_SECONDS = W
    settings.IDLE_GPU_OWNERS_MAY_EXEMPT = True


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(START + seconds, tz=UTC)


def running(team, flavor, **fields) -> Job:
    job = make_job(team, flavor, **fields)
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING, gpus_in_use=job.gpus_to_start, started_at=at(0))
    job.refresh_from_db()
    return job


def on_cluster(fake: FakeCluster, job: Job) -> None:
    """What Kueue or Volcano would have made for the job: its workload, running."""
    namespace = job.team.namespace_name
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    name = object_name(job)
    if job.flavor.scheduler == Scheduler.VOLCANO:
        fake.put({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                  "metadata": {"name": name, "namespace": namespace}, "spec": {"minAvailable": 1}})
        return
    fake.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace}})
    fake.put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
              "metadata": {"name": f"job-{name}-1a2b3", "namespace": namespace,
                           "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                                "uid": "u-1", "controller": True}]},
              "spec": {"active": True, "queueName": job.flavor.name, "podSets": [{"name": "main", "count": 1}]}})


def gpu(prometheus_api, job, percent_at, index=0):
    """The GPU of ``job``'s pod ``index`` busy ``percent_at`` (a number or a function of time)."""
    pod = (f"{object_name(job)}-worker-{index}" if job.flavor.scheduler == Scheduler.VOLCANO
           else f"{object_name(job)}-{index}-abcde")
    return prometheus_api.gpu(job.team.namespace_name, pod, 0, util=percent_at)


def sweep(fake, prometheus_api, seconds) -> dict:
    """One idle sweep at START + ``seconds``, asking the stand-in (None: no Prometheus)."""
    prometheus = Prometheus(prometheus_api.url) if prometheus_api is not None else None
    return reclaim.sweep_idle_jobs(fake, prometheus, now=at(seconds))


def workload(fake, job) -> dict:
    [live] = fake.stored("kueue.x-k8s.io/v1beta2", "Workload")
    return live


def reasons(job) -> list[str]:
    return list(JobEvent.objects.filter(job=job).exclude(reason__in=["Submitted"]).values_list("reason", flat=True))


def test_an_idle_job_is_warned_then_reclaimed_and_a_busy_one_runs_on(team, flavor, fake, prometheus_api):
    idle_job, busy_job = running(team, flavor, name="idle"), running(team, flavor, name="busy")
    on_cluster(fake, idle_job)
    gpu(prometheus_api, idle_job, 0)
    gpu(prometheus_api, busy_job, 80)

    assert sweep(fake, prometheus_api, 20)["warned"] == 0  # idle for 10 s only
    assert sweep(fake, prometheus_api, 40)["warned"] == 1  # idle 30 s: warned
    watch = IdleWatch.objects.get(job=idle_job)
    assert watch.warned_at == at(40) and watch.reclaim_at == at(70)
    event = Event.objects.get(kind=Kind.JOB_IDLE, job=idle_job)
    assert "will be reclaimed" in event.message
    assert sweep(fake, prometheus_api, 50)["warned"] == 0  # warned once
    assert sweep(fake, prometheus_api, 60)["reclaimed"] == 0  # the grace runs
    assert workload(fake, idle_job)["spec"]["active"] is True

    assert sweep(fake, prometheus_api, 70)["reclaimed"] == 1
    idle_job.refresh_from_db()
    busy_job.refresh_from_db()
    assert idle_job.state == State.RECLAIMED and idle_job.reason == RECLAIMED and idle_job.finished_at == at(70)
    assert idle_job.gpus_in_use == 0 and not idle_job.gpu_intervals.filter(ended_at__isnull=True).exists()
    live = workload(fake, idle_job)
    assert live["spec"]["active"] is False
    ours = [e for e in live["metadata"]["managedFields"] if e["manager"] == fake.field_manager]
    assert ours and ours[0]["fieldsV1"]["f:spec"] == {"f:active": {}}  # that field alone
    [batch_job] = fake.stored("batch/v1", "Job")
    assert "suspend" not in (batch_job.get("spec") or {})  # never suspend on the batch Job
    watch.refresh_from_db()
    assert watch.reclaimed_idle_gpu_hours is not None and watch.stopped_at == at(70)
    assert Event.objects.filter(kind=Kind.JOB_RECLAIMED, job=idle_job).exists()
    assert busy_job.state == State.RUNNING and not IdleWatch.objects.get(job=busy_job).is_warned
    assert reasons(idle_job)[-2:] == [WARNED, RECLAIMED]
    # On the sweep's clock, not the machine's: START is a fixed moment, today may be past it.
    assert JobEvent.objects.get(job=idle_job, reason=WARNED).created_at == at(40)


def test_busy_again_during_the_grace_withdraws_the_warning(team, flavor, fake, prometheus_api):
    job = running(team, flavor)
    on_cluster(fake, job)
    load = {"percent": 0.0}
    gpu(prometheus_api, job, lambda t: load["percent"])
    sweep(fake, prometheus_api, 40)
    assert IdleWatch.objects.get(job=job).is_warned
    load["percent"] = 90.0
    assert sweep(fake, prometheus_api, 50)["cleared"] == 1
    load["percent"] = 0.0
    assert sweep(fake, prometheus_api, 70)["reclaimed"] == 0  # the count starts again: 20 s idle
    job.refresh_from_db()
    assert job.state == State.RUNNING and workload(fake, job)["spec"]["active"] is True
    assert CLEARED in reasons(job)
    assert JobEvent.objects.get(job=job, reason=CLEARED).created_at == at(50)


def test_missing_metrics_pause_reclaim_and_restart_the_grace(team, flavor, fake, prometheus_api):
    job = running(team, flavor)
    on_cluster(fake, job)
    utilization = gpu(prometheus_api, job, 0)
    sweep(fake, prometheus_api, 40)  # warned, reclaim at 70
    prometheus_api.answer = (503, b"")  # Prometheus is down
    down = f"Prometheus at {Prometheus(prometheus_api.url).where} answered HTTP 503."
    assert sweep(fake, prometheus_api, 70) == {"watched": 1, "paused": 1, "warned": 0, "cleared": 0, "reclaimed": 0}
    assert sweep(fake, prometheus_api, 90)["reclaimed"] == 0
    watch = IdleWatch.objects.get(job=job)
    assert watch.paused_reason == down and reclaim.status()["why_paused"] == down
    job.refresh_from_db()
    assert job.state == State.RUNNING and workload(fake, job)["spec"]["active"] is True

    # Back, with the gap in the metrics: the grace counts again from where they resume.
    prometheus_api.answer = None
    gap = (START + 60, START + 95)
    utilization.value = lambda t: None if gap[0] < t <= gap[1] else 0.0
    assert sweep(fake, prometheus_api, 100)["reclaimed"] == 0
    watch.refresh_from_db()
    assert watch.grace_from == at(90) and watch.reclaim_at == at(120) and watch.paused_reason == ""
    assert sweep(fake, prometheus_api, 120)["reclaimed"] == 1


def test_a_volcano_gang_is_aborted_by_a_command(team, fake, prometheus_api):
    volcano = make_flavor("a100-vc", scheduler=Scheduler.VOLCANO)
    job = running(team, volcano, workers=2)
    on_cluster(fake, job)
    for i in range(2):
        gpu(prometheus_api, job, 0, i)
    sweep(fake, prometheus_api, 40)
    assert sweep(fake, prometheus_api, 70)["reclaimed"] == 1
    [command] = fake.stored("bus.volcano.sh/v1alpha1", "Command")
    [vcjob] = fake.stored("batch.volcano.sh/v1alpha1", "Job")
    assert command["action"] == "AbortJob"
    assert command["target"] == {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                 "name": object_name(job), "uid": vcjob["metadata"]["uid"], "controller": True}
    assert vcjob["spec"] == {"minAvailable": 1}  # the Job itself untouched


def test_a_job_the_cluster_cannot_stop_now_is_reclaimed_when_it_can_and_charged_until_then(team, flavor, fake, prometheus_api):
    job = running(team, flavor)
    on_cluster(fake, job)
    gpu(prometheus_api, job, 0)
    sweep(fake, prometheus_api, 40)
    fake.fail_next("LIST", TransientError("API server away", status=503))
    assert sweep(fake, prometheus_api, 70)["reclaimed"] == 0
    job.refresh_from_db()
    assert job.state == State.RUNNING and job.gpus_in_use == 1  # its GPUs run on, so they are charged
    assert workload(fake, job)["spec"]["active"] is True
    assert not Event.objects.filter(job=job, kind=Kind.JOB_RECLAIMED).exists()
    assert sweep(fake, prometheus_api, 80)["reclaimed"] == 1
    job.refresh_from_db()
    assert (job.state, job.finished_at, workload(fake, job)["spec"]["active"]) == (State.RECLAIMED, at(80), False)
    assert job.events.get(to_state=State.RECLAIMED).created_at == at(80)  # the GPU-hours end then
    assert IdleWatch.objects.get(job=job).stopped_at == at(80)


def test_nothing_is_watched_when_the_settings_leave_reclaim_off(team, flavor, fake, settings, prometheus_api):
    settings.IDLE_GPU_THRESHOLD_PERCENT = settings.IDLE_GPU_AFTER_SECONDS = settings.IDLE_GPU_GRACE_SECONDS = None
    job = running(team, flavor)
    gpu(prometheus_api, job, 0)
    assert sweep(fake, prometheus_api, 100)["watched"] == 0 and not prometheus_api.queries


def test_a_flavor_policy_turns_it_on_and_a_team_override_changes_the_grace(team, flavor, fake, settings, prometheus_api):
    settings.IDLE_GPU_THRESHOLD_PERCENT = settings.IDLE_GPU_AFTER_SECONDS = settings.IDLE_GPU_GRACE_SECONDS = None
    IdlePolicy.objects.create(flavor=flavor, action=Action.RECLAIM, threshold_percent=5, idle_after_seconds=30,
                              grace_seconds=30)
    IdlePolicy.objects.create(flavor=flavor, team=team, grace_seconds=600)
    rules = IdlePolicy.objects.rules(team, flavor)
    assert (rules.reclaims, rules.threshold_percent, rules.grace_seconds, rules.source) == (True, 5, 600, "flavor")
    job = running(team, flavor)
    on_cluster(fake, job)
    gpu(prometheus_api, job, 0)
    sweep(fake, prometheus_api, 40)
    assert IdleWatch.objects.get(job=job).reclaim_at == at(640)


def test_a_warn_only_policy_warns_and_never_reclaims(team, flavor, fake, prometheus_api):
    IdlePolicy.objects.create(flavor=flavor, action=Action.WARN)
    job = running(team, flavor)
    on_cluster(fake, job)
    gpu(prometheus_api, job, 0)
    assert sweep(fake, prometheus_api, 40)["warned"] == 1
    assert sweep(fake, prometheus_api, 500)["reclaimed"] == 0
    job.refresh_from_db()
    assert job.state == State.RUNNING


def test_time_sliced_and_mps_flavors_are_exempt_and_say_so(team, fake, prometheus_api):
    for sharing in (Sharing.TIME_SLICING, Sharing.MPS):
        shared = make_flavor(f"t4-{sharing}", gpu_sharing=sharing)
        assert "cannot be attributed to one pod" in shared.idle_exempt_because
        assert not IdlePolicy.objects.rules(team, shared).watches
        job = running(team, shared)
        gpu(prometheus_api, job, 0)
        assert sweep(fake, prometheus_api, 100)["watched"] == 0
        policy = IdlePolicy(flavor=shared, action=Action.RECLAIM)
        with pytest.raises(ValidationError):
            policy.full_clean()


def test_inference_servers_are_never_reclaimed(team, flavor, fake, prometheus_api):
    server = running(team, flavor, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=1)
    gpu(prometheus_api, server, 0)
    assert sweep(fake, prometheus_api, 100)["watched"] == 0


# --- the owner's exemption -----------------------------------------------------------------
def test_the_owner_exempts_a_warned_job_with_a_reason(team, flavor, fake, owner, prometheus_api):
    job = running(team, flavor)
    on_cluster(fake, job)
    gpu(prometheus_api, job, 0)
    sweep(fake, prometheus_api, 40)
    rules = IdlePolicy.objects.rules(team, flavor)
    watch = IdleWatch.exempt(job, owner, "Waiting on a dataset copy; resumes tonight.", rules)
    assert watch.is_exempt and not watch.is_warned and watch.exempted_by == owner
    assert watch.history.filter(history_user=owner, exempt_reason__startswith="Waiting").exists()  # audited
    assert EXEMPTED in reasons(job)
    assert sweep(fake, prometheus_api, 200)["watched"] == 0
    job.refresh_from_db()
    assert job.state == State.RUNNING


@pytest.mark.parametrize("who, allowed", [("owner", True), ("member", False), ("viewer", False),
                                          ("outsider", False), ("quota_manager", True)])
def test_who_may_exempt_a_job(team, flavor, who, allowed, request):
    user = request.getfixturevalue(who)
    job = running(team, flavor)
    rules = IdlePolicy.objects.rules(team, flavor)
    assert IdleWatch.can_exempt(job, user, rules) is allowed
    if not allowed:
        with pytest.raises(PermissionDenied):
            IdleWatch.exempt(job, user, "mine", rules)
        assert not IdleWatch.objects.filter(job=job, exempt_reason__gt="").exists()


def test_owners_cannot_exempt_where_the_policy_says_no(team, flavor, owner, quota_manager):
    IdlePolicy.objects.create(flavor=flavor, team=team, owners_may_exempt=False)
    job = running(team, flavor)
    rules = IdlePolicy.objects.rules(team, flavor)
    assert not IdleWatch.can_exempt(job, owner, rules)
    assert IdleWatch.can_exempt(job, quota_manager, rules)


def test_an_exemption_needs_a_reason(team, flavor, owner):
    job = running(team, flavor)
    with pytest.raises(ValidationError) as err:
        IdleWatch.exempt(job, owner, "  ", IdlePolicy.objects.rules(team, flavor))
    assert "reason" in err.value.message_dict


def test_a_note_on_a_running_job_tells_nobody_it_started(team, flavor):
    job = running(team, flavor)
    job.note("KeptAsCreated", "The cluster keeps this job as it was created.")
    assert not Event.objects.filter(job=job, kind=Kind.JOB_STARTED).exists()


@pytest.mark.parametrize(("rank0", "warned"), [(90.0, 0), (1.0, 1)], ids=["one busy rank", "every rank idle"])
def test_a_volcano_gang_with_one_busy_rank_is_never_warned(team, fake, rank0, warned, prometheus_api):
    # The soak's busy-one-rank scene: GPU_SIM_UTIL="rank0=90;*=1" on a gang, the exporter
    # giving the master (RANK 0) 90 % and the workers 1 %; the same gang all at 1 % is idle.
    volcano = make_flavor("a100-vc", scheduler=Scheduler.VOLCANO)
    gang = running(team, volcano, workers=3)
    on_cluster(fake, gang)
    name, namespace = object_name(gang), team.namespace_name
    prometheus_api.gpu(namespace, f"{name}-master-0", 0, host="n0", util=rank0)
    for i in range(2):
        prometheus_api.gpu(namespace, f"{name}-worker-{i}", 0, host=f"n{i + 1}", util=1.0)
    counts = [sweep(fake, prometheus_api, seconds) for seconds in (20, 40, 70, 100)]
    assert sum(c["warned"] for c in counts) == warned and counts[0]["watched"] == 1
    gang.refresh_from_db()
    assert (gang.state == State.RECLAIMED) is bool(warned)
    assert bool(fake.stored("bus.volcano.sh/v1alpha1", "Command")) is bool(warned)


# --- notebooks: stopped, not reclaimed (docs/notebooks.md) ---------------------------------------
NOTEBOOK = dict(kind="notebook", image="quay.io/jupyter/base-notebook:latest", command=[], args=[], env={})


@pytest.fixture
def nominal(team, flavor):
    from tests.builders import make_quota

    return make_quota(team, flavor, nominal_gpus=8)  # a notebook fits the team's own quota or is refused


def _notebook_objects(fake, job) -> None:
    """What the reconcile applied for a running notebook: its StatefulSet at one replica."""
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": job.team.namespace_name}})
    fake.apply(render_job(job))


def _replicas(fake) -> int:
    [sts] = fake.stored("apps/v1", "StatefulSet")
    return sts["spec"]["replicas"]


def test_an_idle_notebook_is_stopped_and_kept_not_reclaimed(team, flavor, fake, nominal, prometheus_api):
    nb = running(team, flavor, name="nb", **NOTEBOOK)
    _notebook_objects(fake, nb)
    assert _replicas(fake) == 1
    prometheus_api.gpu(nb.team.namespace_name, f"{object_name(nb)}-0", 0, util=0)
    assert sweep(fake, prometheus_api, 40)["warned"] == 1
    assert sweep(fake, prometheus_api, 70)["reclaimed"] == 1
    nb.refresh_from_db()
    assert nb.state == State.STOPPED and nb.reason == RECLAIMED and not nb.is_final
    assert "its volumes are kept" in nb.message and nb.gpus_in_use == 0
    assert _replicas(fake) == 0  # applied at once: its pod goes, its StatefulSet and Service stay
    assert fake.stored("v1", "Service")
    watch = IdleWatch.objects.get(job=nb)
    assert not watch.is_warned and watch.reclaimed_idle_gpu_hours is not None  # watched afresh once started


def test_a_notebook_the_cluster_cannot_scale_down_now_runs_on_until_it_can(team, flavor, fake, nominal, prometheus_api):
    nb = running(team, flavor, name="nb", **NOTEBOOK)
    _notebook_objects(fake, nb)
    prometheus_api.gpu(nb.team.namespace_name, f"{object_name(nb)}-0", 0, util=0)
    sweep(fake, prometheus_api, 40)
    fake.fail_next("PATCH", TransientError("API server away", status=503))
    assert sweep(fake, prometheus_api, 70)["reclaimed"] == 0
    nb.refresh_from_db()
    assert (nb.state, nb.gpus_in_use, _replicas(fake)) == (State.RUNNING, 1, 1)
    assert sweep(fake, prometheus_api, 80)["reclaimed"] == 1
    nb.refresh_from_db()
    assert (nb.state, _replicas(fake)) == (State.STOPPED, 0)
    assert nb.events.get(to_state=State.STOPPED).created_at == at(80)


def test_a_notebook_past_its_lifetime_is_stopped_by_the_sweep_without_metrics(team, flavor, fake, settings, nominal):
    settings.IDLE_GPU_THRESHOLD_PERCENT = None  # reclaim off: the lifetime still holds
    nb = running(team, flavor, name="nb", max_runtime_seconds=3600, **NOTEBOOK)
    Job.objects.filter(pk=nb.pk).update(run_admitted_at=at(0))
    nb.refresh_from_db()
    _notebook_objects(fake, nb)
    sweep(fake, None, 3000)
    nb.refresh_from_db()
    assert nb.state == State.RUNNING
    sweep(fake, None, 3700)
    nb.refresh_from_db()
    assert nb.state == State.STOPPED and nb.reason == reclaim.LIFETIME_OVER and _replicas(fake) == 0
