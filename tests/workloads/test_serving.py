"""Serving pods that operate (workloads/serving.py, workloads/notebook.py, workloads/pods.py):
a server's startup probe covers its model's load time, liveness and readiness follow; a server of
several replicas has a disruption budget and spreads over nodes; a notebook is probed too."""

import pytest

from core.ownership import JOB_LABEL
from jobs.manifests import render_job
from jobs.models import Job
from workloads import notebook
from workloads.pods import LIVENESS_FAILURES, PROBE_PERIOD_SECONDS
from workloads.serving import DEFAULT_MODEL_LOAD_SECONDS, PDB

from ..builders import make_flavor, make_job, make_quota, make_team
from ..schemas import validate

pytestmark = pytest.mark.django_db

SERVER = dict(kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=1, readiness_path="/health")
NOTEBOOK = dict(kind=Job.Kind.NOTEBOOK, image=notebook.DEFAULT_IMAGE, command=[], args=[], env={})


@pytest.fixture
def team_and_flavor():
    team, flavor = make_team("serve"), make_flavor("h100")
    make_quota(team, flavor, nominal_gpus=8)
    return team, flavor


def rendered(team_and_flavor, **fields) -> dict:
    """The job's objects by kind, and its one pod template's main container as ``main``."""
    objects = render_job(make_job(*team_and_flavor, **fields))
    for obj in objects:
        validate(obj)
    found = {obj["kind"]: obj for obj in objects if obj["spec"].get("clusterIP") != "None"}
    workload = found.get("Deployment") or found["StatefulSet"]
    [found["main"]] = workload["spec"]["template"]["spec"]["containers"]
    return found


def budget_seconds(probe: dict) -> int:
    return probe["failureThreshold"] * probe["periodSeconds"]


@pytest.mark.parametrize("load", [30, 95, DEFAULT_MODEL_LOAD_SECONDS, 4 * 3600])
def test_a_servers_startup_probe_covers_its_model_load_time(team_and_flavor, load):
    main = rendered(team_and_flavor, **SERVER, model_load_seconds=load)["main"]
    startup = main["startupProbe"]
    assert load <= budget_seconds(startup) < load + PROBE_PERIOD_SECONDS
    assert startup["httpGet"] == {"path": "/health", "port": 8000}


def test_a_server_takes_the_default_model_load_time_unless_told(team_and_flavor):
    job = make_job(*team_and_flavor, **SERVER)
    assert job.model_load_seconds == DEFAULT_MODEL_LOAD_SECONDS


def test_a_server_is_restarted_after_a_minute_without_answering_and_unready_after_half_a_minute(team_and_flavor):
    main = rendered(team_and_flavor, **SERVER, readiness_initial_delay_seconds=45)["main"]
    live, ready = main["livenessProbe"], main["readinessProbe"]
    assert live["httpGet"] == ready["httpGet"] == main["startupProbe"]["httpGet"]
    assert live["httpGet"] is not ready["httpGet"]  # no YAML aliases in the preview
    assert budget_seconds(live) == LIVENESS_FAILURES * PROBE_PERIOD_SECONDS == 60 and live["timeoutSeconds"] >= 1
    assert budget_seconds(ready) == 30 and ready["initialDelaySeconds"] == 45


def test_a_server_of_several_replicas_has_a_disruption_budget_of_one_and_spreads_over_nodes(team_and_flavor):
    found = rendered(team_and_flavor, **{**SERVER, "max_replicas": 3})
    budget, deployment = found["PodDisruptionBudget"], found["Deployment"]
    assert (budget["apiVersion"], budget["kind"]) == PDB
    assert budget["spec"]["maxUnavailable"] == 1 and budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert budget["spec"]["selector"] == deployment["spec"]["selector"] == {"matchLabels": {JOB_LABEL: str(
        deployment["metadata"]["labels"][JOB_LABEL])}}
    template = deployment["spec"]["template"]
    [spread] = template["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["maxSkew"] == 1
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway"  # spread where it can, never left unscheduled
    assert spread["labelSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


def test_a_server_of_one_replica_has_no_budget_that_would_block_its_nodes_drain(team_and_flavor):
    found = rendered(team_and_flavor, **SERVER)
    assert "PodDisruptionBudget" not in found
    assert "topologySpreadConstraints" not in found["Deployment"]["spec"]["template"]["spec"]


def test_a_notebook_is_given_time_to_start_then_restarted_when_it_stops_listening(team_and_flavor):
    main = rendered(team_and_flavor, **NOTEBOOK)["main"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert main[probe]["tcpSocket"] == {"port": "http"}, probe
    assert notebook.STARTUP_SECONDS <= budget_seconds(main["startupProbe"])
    assert budget_seconds(main["livenessProbe"]) == 60
