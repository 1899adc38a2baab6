"""What the worker's reconcile of a new job costs once its team is synced and the watch
cache is warm (the steady state of `make bench-e2e`), and that the shortcuts behind that
cost never skip a write that is needed when the cache is behind the cluster.

- The team's sync is skipped when the cache shows what the job needs of its team
  (`quotas.tasks.team_ready_for`): no request and no query for it.
- A cache miss on a workload kind with field rules (a new job's batch Job, Service, Volcano
  Job) is created in one request that only creates (`cluster.objects.create_only`), not a
  GET and then an apply; if the object exists after all, it is read and decided as before,
  so no controller's field (Kueue's unsuspend) is taken back.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import workloads
from cluster import ObjectRef
from gpuplatform.heal import owner_of
from jobs.lifecycle import State
from jobs.manifests import object_name, render_job
from jobs.models import Job
from jobs.tasks import reconcile_job
from quotas.manifests import job_prerequisites
from quotas.models import Quota, Scheduler
from quotas.tasks import reconcile_team_quotas, sync_team_quotas, team_ready_for
from tenants.admission import PLACEMENT_PREFIX, placement
from tenants.tasks import sync_team

from ..builders import make_flavor, make_job, make_quota

pytestmark = pytest.mark.django_db

# The job's own reconcile: read the job (team, flavor, priority joined), lock its row again
# before the first write (`jobs.tasks._still_applied`: a cancel meanwhile waits, or is seen),
# then move it to queued (UPDATE + its event), all in one transaction. Nothing about the
# team or its quotas.
MAX_QUERIES = 6


@pytest.fixture
def a100(db):
    return make_flavor("a100", scheduler=Scheduler.VOLCANO)


def onboard(cluster, team):
    sync_team(cluster, team)
    sync_team_quotas(cluster, team)


def submitted(team, flavor, **fields) -> Job:
    job = make_job(team, flavor, **fields)
    job.submit()
    return job


def reconcile_counted(cluster, job) -> list[str]:
    """Reconcile `job` as the worker does; the SQL it sent."""
    cluster.reset_counts()
    with CaptureQueriesContext(connection) as queries:
        reconcile_job(job.pk)
    return [q["sql"] for q in queries.captured_queries]


def team_queries(sql: list[str]) -> list[str]:
    """Queries of a team's sync: its status, members, quotas (the job's own read joins the
    team, flavor and priority rows, which is not one)."""
    return [q for q in sql if any(f'FROM "{table}"' in q for table in (
        "tenants_team", "tenants_membership", "quotas_quota", "tenants_groupmapping"))]


def live(cluster, api_version, kind, name, namespace=None) -> dict:
    return cluster.get(api_version, kind, name, namespace)


# --- the cost --------------------------------------------------------------------------------
@pytest.mark.parametrize("workers, creates", [(2, 2), (1, 1)], ids=["gang: Service and batch Job", "one worker: batch Job"])
def test_a_new_kueue_job_of_a_synced_team_costs_its_creates_and_no_read(cached, team, flavor, workers, creates):
    make_quota(team, flavor)
    onboard(cached, team)
    reconcile_job(submitted(team, flavor, workers=2).pk)  # the job kinds' informers are started

    for _ in range(3):
        job = submitted(team, flavor, workers=workers)
        sql = reconcile_counted(cached, job)

        assert dict(cached.requests) == {"PATCH": creates}  # no GET, no LIST
        assert len(sql) <= MAX_QUERIES, sql
        assert not team_queries(sql), sql  # the team is not synced
        job.refresh_from_db()
        assert job.state == State.QUEUED
        batch = live(cached, "batch/v1", "Job", object_name(job), team.namespace_name)
        assert batch["spec"]["suspend"] is True


def test_a_new_volcano_job_of_a_synced_team_costs_one_create(cached, team, a100):
    make_quota(team, a100)
    onboard(cached, team)
    reconcile_job(submitted(team, a100).pk)

    job = submitted(team, a100)
    sql = reconcile_counted(cached, job)

    assert dict(cached.requests) == {"PATCH": 1}
    assert not team_queries(sql), sql


def test_a_second_reconcile_of_the_job_sends_nothing(cached, team, flavor):
    make_quota(team, flavor)
    onboard(cached, team)
    job = submitted(team, flavor)
    reconcile_job(job.pk)

    cached.reset_counts()
    reconcile_job(job.pk)
    assert dict(cached.requests) == {}  # created through create_only, owned through apply


def test_the_scheduler_names_the_queue_objects_its_quota_renders(team, flavor, a100):
    make_quota(team, flavor)
    make_quota(team, a100)
    for quota in Quota.objects.of_team(team):
        scheduler = workloads.for_flavor(quota.flavor)
        rendered = scheduler.queue_objects(quota, team.namespace_name, team.slug)
        refs = scheduler.queue_refs(team.namespace_name, quota.flavor)
        assert sorted(ObjectRef(*ref).identity for ref in refs) == sorted(ObjectRef.of(o).identity for o in rendered)


# --- the team's sync runs whenever the cache cannot vouch for what the job needs --------------
def test_without_a_watch_cache_the_team_is_synced_as_before(fake, team, flavor):
    make_quota(team, flavor)
    onboard(fake, team)
    assert not team_ready_for(fake, team, flavor)

    sql = reconcile_counted(fake, submitted(team, flavor))
    assert fake.requests["LIST"] > 0 and team_queries(sql)


def test_a_quota_on_a_new_flavor_gets_its_queues_with_the_first_job(cached, team, flavor, a100):
    make_quota(team, flavor)
    onboard(cached, team)
    make_quota(team, a100)  # nothing has reconciled the team's quotas since
    assert not team_ready_for(cached, team, a100)

    job = submitted(team, a100)
    reconcile_job(job.pk)

    queue = workloads.queue_name(team.namespace_name, a100)
    assert live(cached, "scheduling.volcano.sh/v1beta1", "Queue", queue)
    params = live(cached, "v1", "ConfigMap", "gpuplatform-admission", team.namespace_name)
    assert params["data"][queue] == "a100"
    assert team_ready_for(cached, team, a100)


@pytest.mark.parametrize("missing", ["Namespace", "ResourceQuota", "ConfigMap", "ClusterQueue", "LocalQueue"])
def test_each_prerequisite_missing_from_the_cache_means_a_sync(cached, team, flavor, missing):
    make_quota(team, flavor)
    onboard(cached, team)
    assert team_ready_for(cached, team, flavor)
    [ref] = [ObjectRef(*ref) for ref in job_prerequisites(team, flavor) if ref[1] == missing]
    cached.cache.forget(ref)  # as after a relist that no longer finds it

    assert not team_ready_for(cached, team, flavor)


def test_admission_parameters_that_do_not_name_the_jobs_queue_mean_a_sync(cached, team, flavor):
    make_quota(team, flavor)
    onboard(cached, team)
    params = live(cached, "v1", "ConfigMap", "gpuplatform-admission", team.namespace_name)
    params["data"] = {}  # the policy would refuse the job
    cached.put(params)
    cached.cache.catch_up()
    assert not team_ready_for(cached, team, flavor)

    reconcile_job(submitted(team, flavor).pk)
    params = live(cached, "v1", "ConfigMap", "gpuplatform-admission", team.namespace_name)
    assert params["data"] == {workloads.queue_name(team.namespace_name, flavor): flavor.name,
                              PLACEMENT_PREFIX + flavor.name: placement(flavor)}


def test_a_team_that_is_not_ready_is_synced(cached, team, flavor):
    make_quota(team, flavor)
    onboard(cached, team)
    team.set_status(team.Status.PENDING, "")
    assert not team_ready_for(cached, team, flavor)


# --- a cache behind the cluster: the needed write still happens -------------------------------
def test_a_queue_deleted_behind_the_cache_is_recreated_once_the_watch_brings_it(cached, team, flavor, changes):
    make_quota(team, flavor)
    onboard(cached, team)
    reconcile_job(submitted(team, flavor).pk)
    local_queue = ("kueue.x-k8s.io/v1beta2", "LocalQueue", flavor.name, team.namespace_name)
    cached.remove(*local_queue)  # the cache has not seen it yet

    job = submitted(team, flavor)
    reconcile_job(job.pk)  # the stale cache still shows the queue: the team is not synced now
    cached.cache.catch_up()  # ... and then the watch brings the delete

    [(event, obj)] = [(e, o) for e, o in changes if o["kind"] == "LocalQueue"]
    assert event == "DELETED"
    assert owner_of(obj["metadata"]["labels"]) == f"team:{team.slug}"  # gpuplatform.heal reconciles the team
    assert not team_ready_for(cached, team, flavor)
    assert reconcile_team_quotas(team.pk) >= 1
    assert live(cached, *local_queue)


def test_a_job_created_behind_the_cache_and_admitted_is_not_suspended_again(cached, team, flavor):
    """A retried reconcile whose first attempt (another worker process) created the job's
    objects, which Kueue has since admitted, while this process's cache has not seen them."""
    make_quota(team, flavor)
    onboard(cached, team)
    reconcile_job(submitted(team, flavor).pk)  # the job kinds' informers are synced
    job = submitted(team, flavor, workers=2)  # a gang: its Service and batch Job
    cache, cached.cache = cached.cache, None
    cached.apply(render_job(Job.objects.select_related("team", "flavor").get(pk=job.pk)))
    cached.cache = cache
    name, namespace = object_name(job), team.namespace_name
    admitted = live(cached, "batch/v1", "Job", name, namespace)
    admitted["spec"]["suspend"] = False  # Kueue admitted it
    admitted = cached.put(admitted)

    cached.reset_counts()
    reconcile_job(job.pk)
    requests = dict(cached.requests)

    batch = live(cached, "batch/v1", "Job", name, namespace)
    assert batch["spec"]["suspend"] is False
    assert batch["metadata"]["resourceVersion"] == admitted["metadata"]["resourceVersion"]  # nothing written
    # Each create was refused (409) and the object read and found as desired.
    assert requests == {"PATCH": 2, "GET": 2}
    job.refresh_from_db()
    assert job.state == State.QUEUED


def test_an_object_created_behind_the_cache_with_a_changed_field_of_ours_is_updated(cached, team, flavor):
    make_quota(team, flavor)
    onboard(cached, team)
    reconcile_job(submitted(team, flavor).pk)
    job = submitted(team, flavor)
    cache, cached.cache = cached.cache, None
    cached.apply(render_job(Job.objects.select_related("team", "flavor").get(pk=job.pk)))
    cached.cache = cache
    name, namespace = object_name(job), team.namespace_name
    batch = live(cached, "batch/v1", "Job", name, namespace)
    batch["spec"]["suspend"] = False
    batch["spec"]["backoffLimit"] = 9  # ours: set back
    cached.put(batch)

    reconcile_job(job.pk)

    batch = live(cached, "batch/v1", "Job", name, namespace)
    assert batch["spec"]["backoffLimit"] == 3
    assert batch["spec"]["suspend"] is False  # Kueue's, kept
