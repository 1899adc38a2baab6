"""Inference scaling on GPU utilization (KEDA): the ScaledObject, table-style, against KEDA's
own CRD schema; the replicas it may ask for within the team's quota; KEDA's HPA left to KEDA
(never pruned, its replica counts never taken back); and the option refused, in words, on a
cluster without KEDA or without a Prometheus. Live: tests/live/cluster/test_gpu_autoscaling_live.py."""

import re
from dataclasses import dataclass, field
from typing import Callable

import jsonschema
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from cluster import FakeCluster
from core.ownership import JOB_LABEL, MANAGED_BY_LABEL, TEAM_LABEL
from jobs.manifests import object_name, render_job
from jobs.models import Job
from jobs.tasks import reconcile_job
from tenants.models import Team
from workloads import autoscaling
from workloads.kinds import for_job
from workloads.serving import KEDA_HPA_EXCLUDED_LABELS, SCALED_OBJECT

from ..builders import build_job, make_flavor, make_job, make_quota
from ..schemas import validate
from ..security import assert_hardened

pytestmark = pytest.mark.django_db

PROMETHEUS = "http://prometheus.monitoring.svc:9090"
SERVER = dict(kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=3, autoscale_metric="gpu",
              target_gpu_utilization_percent=60)


@pytest.fixture
def keda(fake, settings):
    """A cluster with KEDA (the fake serves every kind) and a Prometheus for it."""
    settings.PROMETHEUS_URL = PROMETHEUS
    return fake


@dataclass
class Case:
    name: str
    job: dict = field(default_factory=dict)
    check: Callable[[dict, Job], None] = lambda objects, job: None
    quota_gpus: int = 8
    gpus_per_worker: int = 1
    settings: dict = field(default_factory=dict)
    scheduler: str = "kueue"


def by_kind(objects) -> dict:
    return {o["kind"]: o for o in objects}


def scaled_object(objects) -> dict:
    return by_kind(objects)["ScaledObject"]


def autoscaling_kinds(objects) -> list[str]:
    """The kinds rendered, but the disruption budget of a server of several replicas (tests/workloads/test_serving.py)."""
    return [kind for kind in by_kind(objects) if kind != "PodDisruptionBudget"]


def trigger(objects) -> dict:
    [only] = scaled_object(objects)["spec"]["triggers"]
    return only


# --- checks -----------------------------------------------------------------------------------
def a_scaled_object_instead_of_an_hpa(objects, job):
    assert autoscaling_kinds(objects) == ["Deployment", "Service", "ScaledObject"]
    spec = scaled_object(objects)["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": object_name(job)}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 3)
    assert trigger(objects)["type"] == "prometheus" and trigger(objects)["metricType"] == "Value"
    assert trigger(objects)["metadata"]["threshold"] == "60"
    assert trigger(objects)["metadata"]["serverAddress"] == PROMETHEUS


def the_query_averages_the_gpus_of_this_jobs_pods(objects, job):
    query = trigger(objects)["metadata"]["query"]
    match = re.fullmatch(r'avg\(DCGM_FI_DEV_GPU_UTIL\{namespace="([^"]+)",pod=~"([^"]+)"\}\)', query)
    assert match, query
    namespace, pods = match.groups()
    assert namespace == job.team.namespace_name
    name = object_name(job)
    assert re.fullmatch(pods, f"{name}-7d9f8b6c5d-x2x4q")  # a replica of its Deployment
    assert not re.fullmatch(pods, f"{name}-7-7d9f8b6c5d-x2x4q")  # a replica of job "<name>-7"
    assert not re.fullmatch(pods, f"x{name}-7d9f8b6c5d-x2x4q")


def the_target_defaults_to_70(objects, job):
    assert trigger(objects)["metadata"]["threshold"] == "70"


def at_most_what_the_quota_runs(expected):
    def check(objects, job):
        assert scaled_object(objects)["spec"]["maxReplicaCount"] == expected
    return check


def never_below_its_minimum(objects, job):
    spec = scaled_object(objects)["spec"]
    assert spec["minReplicaCount"] == spec["maxReplicaCount"] == 2


def keda_hpa_gets_no_managed_by_label_of_ours(objects, job):
    so = scaled_object(objects)
    assert so["metadata"]["annotations"] == {KEDA_HPA_EXCLUDED_LABELS: MANAGED_BY_LABEL}
    labels = so["metadata"]["labels"]
    assert labels[TEAM_LABEL] == job.team.slug and labels[JOB_LABEL] == str(job.pk)


def polling_and_scale_down_from_settings(objects, job):
    spec = scaled_object(objects)["spec"]
    assert spec["pollingInterval"] == 5
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] == {
        "scaleDown": {"stabilizationWindowSeconds": 20}}


def credentials_through_a_cluster_trigger_authentication(objects, job):
    assert trigger(objects)["authenticationRef"] == {"name": "prometheus-creds", "kind": "ClusterTriggerAuthentication"}
    assert trigger(objects)["metadata"]["authModes"] == "basic"


def no_authentication_without_one(objects, job):
    assert "authenticationRef" not in trigger(objects) and "authModes" not in trigger(objects)["metadata"]


def no_autoscaler_at_all(objects, job):
    assert autoscaling_kinds(objects) == ["Deployment", "Service"]


def an_hpa_on_cpu(objects, job):
    assert autoscaling_kinds(objects) == ["Deployment", "Service", "HorizontalPodAutoscaler"]


CASES = [
    Case("a server scaling on gpu gets a ScaledObject on a Prometheus trigger, no HPA", SERVER,
         a_scaled_object_instead_of_an_hpa),
    Case("its trigger averages the GPUs of this job's pods only", SERVER, the_query_averages_the_gpus_of_this_jobs_pods),
    Case("a server on volcano scales the same way", SERVER, a_scaled_object_instead_of_an_hpa, scheduler="volcano"),
    Case("without a target it keeps GPUs at 70 %", dict(SERVER, target_gpu_utilization_percent=None),
         the_target_defaults_to_70),
    Case("its most replicas are what the team's quota can run", dict(SERVER, max_replicas=6),
         at_most_what_the_quota_runs(2), quota_gpus=4, gpus_per_worker=2),
    Case("borrowing aside, a quota bigger than the server leaves its maximum", dict(SERVER, max_replicas=3),
         at_most_what_the_quota_runs(3), quota_gpus=64),
    Case("a quota below its minimum keeps it at its minimum", dict(SERVER, min_replicas=2, max_replicas=5),
         never_below_its_minimum, quota_gpus=1),
    Case("KEDA's HPA is not labelled as ours, the ScaledObject is", SERVER, keda_hpa_gets_no_managed_by_label_of_ours),
    Case("polling and the scale-down window come from settings", SERVER, polling_and_scale_down_from_settings,
         settings=dict(KEDA_POLLING_INTERVAL_SECONDS=5, KEDA_SCALE_DOWN_WINDOW_SECONDS=20)),
    Case("credentials are a ClusterTriggerAuthentication the operators made", SERVER,
         credentials_through_a_cluster_trigger_authentication,
         settings=dict(KEDA_PROMETHEUS_AUTHENTICATION="prometheus-creds", KEDA_PROMETHEUS_AUTH_MODES="basic")),
    Case("without credentials the trigger names no authentication", SERVER, no_authentication_without_one),
    Case("a server of fixed size has no autoscaler, whatever it scales on", dict(SERVER, min_replicas=2, max_replicas=2),
         no_autoscaler_at_all),
    Case("a server scaling on cpu keeps its HPA", dict(SERVER, autoscale_metric="cpu"), an_hpa_on_cpu),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_render_gpu_scaling(case, keda, settings):
    for name, value in case.settings.items():
        setattr(settings, name, value)
    team = Team.objects.create(slug="vision", display_name="Vision")
    flavor = make_flavor("h100", scheduler=case.scheduler, gpus_per_node=8)
    make_quota(team, flavor, nominal_gpus=case.quota_gpus)
    job = make_job(team, flavor, gpus_per_worker=case.gpus_per_worker, **case.job)
    objects = render_job(job)
    for obj in objects:
        validate(obj)
    assert assert_hardened(objects, job) >= 1
    case.check(objects, job)
    assert render_job(job) == objects


def test_the_scaled_object_is_checked_against_kedas_own_crd(keda, team, flavor):
    make_quota(team, flavor)
    objects = render_job(make_job(team, flavor, **SERVER))
    assert "github.com/kedacore/keda/v2@v2.21.0" in validate(scaled_object(objects))
    bad = scaled_object(objects)
    bad["spec"]["maxReplicas"] = bad["spec"].pop("maxReplicaCount")  # the HPA's spelling
    with pytest.raises(jsonschema.ValidationError, match="'maxReplicas' was unexpected"):
        validate(bad)


def test_the_inference_kind_renders_and_so_may_apply_scaled_objects(keda, team, flavor):
    job = make_job(team, flavor, **SERVER)
    assert SCALED_OBJECT in for_job(job).renders


# --- KEDA's objects stay KEDA's -------------------------------------------------------------
def keda_makes_its_hpa(fake: FakeCluster, job) -> dict:
    """What KEDA's operator does with our ScaledObject: an HPA with its labels, but those the
    annotation excludes, named keda-hpa-<name>."""
    [so] = [o for o in fake.stored(*SCALED_OBJECT) if o["metadata"]["name"] == object_name(job)]
    excluded = so["metadata"]["annotations"][KEDA_HPA_EXCLUDED_LABELS].split(",")
    labels = {k: v for k, v in so["metadata"]["labels"].items() if k not in excluded}
    hpa = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": f"keda-hpa-{object_name(job)}", "namespace": so["metadata"]["namespace"],
                        "labels": {**labels, MANAGED_BY_LABEL: "keda-operator"}},
           "spec": {"scaleTargetRef": so["spec"]["scaleTargetRef"], "minReplicas": 1, "maxReplicas": 3,
                    "metrics": []}}
    fake.put(hpa)
    return hpa


def test_a_reconcile_never_prunes_kedas_hpa_nor_takes_back_the_replicas_it_sets(keda, team, flavor):
    make_quota(team, flavor)
    job = make_job(team, flavor, **SERVER)
    job.submit()
    reconcile_job(job.pk)
    hpa = keda_makes_its_hpa(keda, job)
    [deployment] = keda.stored("apps/v1", "Deployment")
    assert deployment["spec"]["replicas"] == 1
    deployment["spec"]["replicas"] = 3  # KEDA's HPA scales it up
    keda.put(deployment)
    for _sweep in range(2):
        keda.reset_counts()
        assert reconcile_job(job.pk) == 0
        assert keda.writes == 0
    assert [h["metadata"]["name"] for h in keda.stored("autoscaling/v2", "HorizontalPodAutoscaler")] == [
        hpa["metadata"]["name"]]
    assert keda.stored("apps/v1", "Deployment")[0]["spec"]["replicas"] == 3


# --- where it is offered --------------------------------------------------------------------
def test_without_kedas_crd_gpu_scaling_is_unavailable_and_refused_with_a_field_error(monkeypatch, settings, team,
                                                                                     flavor):
    from core import reconcile

    settings.PROMETHEUS_URL = PROMETHEUS
    cluster = FakeCluster(missing_kinds=[SCALED_OBJECT])
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    assert "no KEDA" in autoscaling.unavailable()
    with pytest.raises(ValidationError) as refused:
        build_job(team, flavor, **SERVER).full_clean()
    assert list(refused.value.message_dict) == ["autoscale_metric"]
    assert "KEDA" in refused.value.message_dict["autoscale_metric"][0]
    build_job(team, flavor, **dict(SERVER, autoscale_metric="cpu")).full_clean()  # CPU still is


def test_without_a_prometheus_gpu_scaling_is_unavailable(keda, settings, team, flavor):
    settings.PROMETHEUS_URL = ""
    assert "PROMETHEUS_URL" in autoscaling.unavailable()
    settings.KEDA_PROMETHEUS_URL = "http://prometheus.monitoring.svc:9090"  # KEDA's own address is enough
    assert autoscaling.unavailable() == ""


def test_without_a_cluster_gpu_scaling_is_unavailable(settings):
    settings.PROMETHEUS_URL = PROMETHEUS
    settings.KUBECONFIG = "/nonexistent/kubeconfig"
    settings.KUBE_IN_CLUSTER = False
    assert "no KEDA" in autoscaling.unavailable()


def test_kedas_presence_is_asked_of_discovery_once_a_minute(keda, monkeypatch):
    asked = []
    monkeypatch.setattr(keda, "serves", lambda *kind: asked.append(kind) or True)
    clock = [1000.0]
    monkeypatch.setattr(autoscaling.time, "monotonic", lambda: clock[0])
    assert all(autoscaling.keda_served() for _ in range(5))
    assert asked == [SCALED_OBJECT]
    clock[0] += autoscaling.SERVED_SECONDS + 1
    assert autoscaling.keda_served()
    assert len(asked) == 2


def test_a_cluster_that_cannot_be_asked_has_no_keda_for_now(keda, monkeypatch):
    from cluster import TransientError

    def unreachable(*kind):
        raise TransientError("connection refused", status=503)

    monkeypatch.setattr(keda, "serves", unreachable)
    assert autoscaling.keda_served() is False


SUBMIT = reverse("jobs:submit")


def test_the_form_says_gpu_scaling_is_unavailable_and_why_and_keeps_what_was_typed(monkeypatch, settings, client_for,
                                                                                  owner, team, flavor):
    from core import reconcile

    settings.PROMETHEUS_URL = PROMETHEUS
    cluster = FakeCluster(missing_kinds=[SCALED_OBJECT])
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    make_quota(team, flavor)
    client = client_for(owner)
    page = client.get(SUBMIT, {"preset": "inference"}).content.decode()
    assert "GPU utilization (unavailable here)" in page and "this cluster has no KEDA" in page
    data = dict(team=team.pk, kind="inference", name="serve-gpu", flavor=flavor.pk, priority="",
                image="vllm/vllm-openai:v0.6.4", command="", args="--port 8000", env="", gpus_per_worker=1,
                cpu_per_worker=4, memory_per_worker_gib=32, port=8000, min_replicas=1, max_replicas=3,
                readiness_path="/health", autoscale_metric="gpu", target_gpu_utilization_percent=55)
    response = client.post(SUBMIT, data)
    assert response.status_code == 400 and not Job.objects.exists()
    form = response.context["form"]
    assert "KEDA" in form.errors["autoscale_metric"][0]
    assert form["target_gpu_utilization_percent"].value() == "55" and form["name"].value() == "serve-gpu"


def test_with_keda_the_form_offers_gpu_scaling_and_submits_it(keda, client_for, member, team, flavor):
    make_quota(team, flavor)
    client = client_for(member)
    page = client.get(SUBMIT, {"preset": "inference"}).content.decode()
    assert "GPU utilization" in page and "unavailable here" not in page
    data = dict(team=team.pk, kind="inference", name="serve-gpu", flavor=flavor.pk, priority="",
                image="vllm/vllm-openai:v0.6.4", command="", args="", env="", gpus_per_worker=1,
                cpu_per_worker=4, memory_per_worker_gib=32, port=8000, min_replicas=1, max_replicas=3,
                readiness_path="/health", autoscale_metric="gpu", target_gpu_utilization_percent=55)
    response = client.post(SUBMIT, data)
    assert response.status_code == 302, response.context["form"].errors
    job = Job.objects.get(name="serve-gpu")
    assert (job.autoscale_metric, job.target_gpu_utilization_percent) == ("gpu", 55)


def test_a_server_posted_without_a_metric_scales_on_cpu(keda, client_for, owner, team, flavor):
    make_quota(team, flavor)
    data = dict(team=team.pk, kind="inference", name="serve", flavor=flavor.pk, priority="",
                image="vllm/vllm-openai:v0.6.4", command="", args="", env="", gpus_per_worker=1,
                cpu_per_worker=4, memory_per_worker_gib=32, port=8000, min_replicas=1, max_replicas=3)
    assert client_for(owner).post(SUBMIT, data).status_code == 302
    assert Job.objects.get(name="serve").autoscale_metric == "cpu"
