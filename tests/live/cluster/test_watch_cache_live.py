"""The reconciler's watch cache against the local cluster: a warm resync sends nothing, and
edits, creates and deletes made behind the cache's back (by another client, at once,
before its watch can tell) never make it prune a live object, take back a controller's
field, or lose a needed write."""

import threading
import uuid

import pytest

from cluster import Cluster, ObjectRef
from core.ownership import team_selector
from jobs.lifecycle import State
from jobs.manifests import object_name
from jobs.tasks import sync_job
from quotas.tasks import sync_team_quotas
from tenants.manifests import TEAM_KINDS
from tenants.tasks import sync_team

from ...support.cluster import reaches, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

POLICY = ("networking.k8s.io/v1", "NetworkPolicy")
OUTLIVES_THE_TEST = {"GPUPLATFORM_FAKE_DURATION": "900s"}  # kwok keeps the pods running


class Heard:
    """What the cache's `on_change` was told, for threads to wait on."""

    def __init__(self):
        self.events: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, event, obj):
        with self._lock:
            self.events.append((event, obj["kind"], obj["metadata"]["name"]))

    def saw(self, event, kind, name) -> bool:
        with self._lock:
            return (event, kind, name) in self.events


@pytest.fixture
def heard():
    return Heard()


@pytest.fixture
def cached(kube_cluster, heard):
    cluster = Cluster(kubeconfig=kube_cluster, watch_cache=True)
    cluster.cache.on_change = heard
    yield cluster
    cluster.close()


def onboard(cluster, team):
    return sync_team(cluster, team) + sync_team_quotas(cluster, team)


def watches_open(cluster) -> bool:
    """Every informer the cache started has sent its WATCH: one reads "watching" once its
    LIST is in, and its thread sends the WATCH a moment later (longer on a loaded machine)."""
    return cluster.requests["WATCH"] >= len(cluster.cache.states())


def test_a_warm_cache_resyncs_a_team_without_a_single_request(cached, world):
    team, _, _ = world
    assert onboard(cached, team).writes == 0  # the world fixture created it; this fills the cache
    wait_until(lambda: watches_open(cached), timeout=30, message="the cache's watches open")
    cached.reset_counts()

    assert onboard(cached, team).writes == 0
    assert dict(+cached.requests) == {}


def test_behind_the_caches_back_nothing_live_is_pruned_and_no_write_is_lost(cached, world, api_client, heard):
    from kubernetes import client

    team, _, _ = world
    ns = team.namespace_name
    onboard(cached, team)
    net = client.NetworkingV1Api(api_client)
    kept, deleted = "allow-same-namespace", "default-deny-ingress"
    # Another client, at once: takes one policy over (no longer ours), deletes another, and
    # creates a labelled stray of a kind the team's reconcile prunes.
    net.patch_namespaced_network_policy(kept, ns, {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}})
    net.delete_namespaced_network_policy(deleted, ns)
    stray = f"stray-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api_client).create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(
        name=stray, labels={"app.kubernetes.io/managed-by": "gpuplatform", "gpuplatform.io/team": team.slug})))

    # A prune decided on what the cache shows (it may still say "ours") deletes nothing live.
    cached.prune(team_selector(team.slug), [], [POLICY])
    assert cached.get(*POLICY, kept, ns)["metadata"]["labels"].get("app.kubernetes.io/managed-by") is None

    # The reconcile right after either sees the delete and writes the policy back, or the
    # watch tells of it and the reconcile it asks for does.
    onboard(cached, team)
    wait_until(lambda: heard.saw("DELETED", "NetworkPolicy", deleted) or cached.get(*POLICY, deleted, ns),
               timeout=30, message="the deletion to be healed or heard")
    onboard(cached, team)
    assert cached.get(*POLICY, deleted, ns)

    # The stray is pruned once the cache has seen it (maybe by the reconciles above already).
    def seen_or_gone():
        cache = cached.snapshot(team_selector(team.slug), [("v1", "ConfigMap")]).items()
        on_cluster = cached.list("v1", "ConfigMap", namespace=ns)
        return not any(o["metadata"]["name"] == stray for o in on_cluster) or any(
            o["metadata"]["name"] == stray for o in cache)

    wait_until(seen_or_gone, timeout=30, message="the cache to see the stray")
    onboard(cached, team)
    assert not any(o["metadata"]["name"] == stray for o in cached.list("v1", "ConfigMap", namespace=ns))


def test_a_cut_watch_resumes_and_still_tells_of_a_delete(cached, world, api_client, heard):
    from kubernetes import client

    team, _, _ = world
    ns = team.namespace_name
    onboard(cached, team)
    for informer in list(cached.cache._kinds.values()):
        informer.stream._drop_connection()  # a network cut: the stream resumes from its version
    client.RbacAuthorizationV1Api(api_client).delete_namespaced_role_binding(
        next(o["metadata"]["name"] for o in cached.list("rbac.authorization.k8s.io/v1", "RoleBinding", namespace=ns)), ns)

    wait_until(lambda: any(e[0] == "DELETED" and e[1] == "RoleBinding" for e in heard.events),
               timeout=30, message="the cache to hear the RoleBinding's deletion")
    assert onboard(cached, team).writes == 1


def test_a_running_kueue_job_keeps_its_pods_through_cache_reads_and_a_cache_miss(cached, world):
    team, h100, _ = world
    job = submit(cached, team, h100, workers=1, gpus_per_worker=1, env=OUTLIVES_THE_TEST)
    reaches(job, State.QUEUED)
    name, ns = object_name(job), team.namespace_name
    wait_until(lambda: cached.get("batch/v1", "Job", name, ns)["spec"].get("suspend") is False,
               timeout=120, message="Kueue to admit the job")

    for _ in range(3):
        job.refresh_from_db()
        assert sync_job(cached, job).writes == 0
    cached.cache.forget(ObjectRef("batch/v1", "Job", ns, name))  # a miss: unknown, so read
    cached.reset_counts()
    assert sync_job(cached, job).writes == 0
    assert cached.requests["GET"] >= 1
    assert cached.get("batch/v1", "Job", name, ns)["spec"]["suspend"] is False


def test_the_cache_fills_every_kind_with_one_list_for_all_teams(kube_cluster, world):
    team, _, _ = world
    fresh = Cluster(kubeconfig=kube_cluster, watch_cache=True)
    try:
        onboard(fresh, team)
        onboard(fresh, team)
        assert fresh.requests["LIST"] <= len(TEAM_KINDS) + 6  # team and quota kinds, namespaces; once
        assert fresh.writes == 0
    finally:
        fresh.close()
