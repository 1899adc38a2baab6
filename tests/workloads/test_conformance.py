"""The conformance suite of the kinds of work (`workloads.kinds.KINDS`), parametrized over the
registry: a kind that lacks or contradicts a capability fails here instead of shipping. Its
objects (valid against the CRDs, granted, pruned, watched, declared in its admission fragment
and so matched and admitted by the team namespaces' policy): `test_workload_kinds.py`; each
preset validates: `tests/jobs/test_forms_presets.py`. Here: the GPU shape in Python and SQL
agree, the idle words match the reclaim policy, a stop is granted, every error is reported;
and a kind defined only in the tests (`sample_kind`), registered alone, reaches every place
derived from the registry with no other file touched, the admission policy included (its
place in the soak: bench/tests/test_soak_plan_mix.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gpuplatform.rbac import required
from jobs.gpus import START_GPUS, TOTAL_GPUS
from jobs.manifests import JOB_KINDS
from jobs.models import IdleWatch, Job
from jobs.use import reclaim
from jobs.watch.watcher import WATCHED
from quotas.models import IdlePolicy
from tenants.admission import matched_resources, render_admission
from workloads.kinds import KINDS, inference, integrations, ray_cluster, ray_job

from ..builders import build_job, make_flavor, make_team

ROOT = Path(__file__).resolve().parents[2]
IDS = [kind.name for kind in KINDS]


def _fields(kind: str, a: int, b: int, other: int | None) -> dict:
    """Fields a job of ``kind`` may hold (the database's constraints hold): a server's replica
    bounds in order on one worker; the other kinds' replica fields anything, ignored or not."""
    if kind == inference.NAME:
        return dict(workers=1, port=8000, min_replicas=min(a, b), max_replicas=max(a, b))
    return dict(workers=a, min_replicas=other, max_replicas=b if other else None)


@pytest.mark.django_db
@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.tuples(st.sampled_from(IDS), st.integers(1, 64), st.integers(1, 64), st.integers(1, 8),
                                 st.one_of(st.none(), st.integers(1, 64))), min_size=1, max_size=12))
def test_python_and_sql_agree_on_what_every_kind_asks(sizes):
    team, flavor = make_team(), make_flavor(gpus_per_node=8)
    jobs = Job.objects.bulk_create(
        build_job(team, flavor, kind=kind, gpus_per_worker=gpus, state=Job.State.QUEUED, **_fields(kind, a, b, other))
        for kind, a, b, gpus, other in sizes)
    rows = {pk: (most, start) for pk, most, start in Job.objects.filter(team=team)
            .annotate(most=TOTAL_GPUS, start=START_GPUS).values_list("pk", "most", "start")}
    for job in jobs:
        assert rows[job.pk] == (job.total_gpus, job.gpus_to_start), (job.kind, job.workers, job.min_replicas)


@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_the_idle_sweep_watches_a_kind_exactly_when_it_can_stop_it_and_says_why_not(kind):
    assert (kind.name in reclaim.WATCHED_KINDS) == kind.reclaimable
    if kind.reclaimable:
        assert not kind.idle_words, "a kind the sweep stops has the policy's words, not its own"
    else:
        assert kind.idle_words, f"{kind.name} is never reclaimed and must say why"


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS, ids=IDS)
def test_a_jobs_idle_summary_speaks_of_its_own_kind(kind):
    team, flavor = make_team(), make_flavor(scheduler=kind.schedulers[0])
    job = build_job(team, flavor, kind=kind.name)
    rules = IdlePolicy.objects.rules_for([(team, flavor)])[(team.pk, flavor.pk)]
    policy = IdleWatch.summary(job, rules)["policy"]
    assert policy == (rules.describe() if kind.reclaimable else kind.idle_words)


def test_ray_kinds_are_not_called_inference_servers_when_they_are_never_reclaimed():
    for kind in (ray_job.KIND, ray_cluster.KIND):
        assert kind.idle_words.startswith(kind.label.split()[0]) and "Inference" not in kind.idle_words


@pytest.mark.parametrize("integration", [i for i in integrations() if i.stop],
                         ids=[f"{i.name} on {i.scheduler}" for i in integrations() if i.stop])
def test_what_a_stop_takes_is_granted_to_the_platform(integration):
    needs = required()
    for key, verbs in integration.stop_rights.items():
        assert verbs <= needs.get(key, set()), key


@pytest.mark.django_db
def test_every_error_of_a_job_is_reported_even_several_on_one_field():
    team, flavor = make_team(), make_flavor(gpus_per_node=8)
    job = build_job(team, flavor, gpus_per_worker=9,
                    env={"MASTER_ADDR": "x", "NVIDIA_VISIBLE_DEVICES": "all", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "1G"})
    with pytest.raises(Exception) as raised:
        job.clean()
    errors = raised.value.message_dict
    assert len(errors["env"]) == 3, errors["env"]
    assert any("MASTER_ADDR" in e for e in errors["env"]) and any("NVIDIA_VISIBLE_DEVICES" in e for e in errors["env"])
    assert any("CUDA_MPS_" in e for e in errors["env"])
    assert "gpus_per_worker" in errors


# --- a kind defined only in the tests ----------------------------------------------------------
REGISTER_AND_REPORT = """
import json
import django
import workloads.kinds as registry
from tests.workloads import sample_kind
registry.KINDS = (*registry.KINDS, sample_kind.KIND)   # one registry line
django.setup()

from drf_spectacular.generators import SchemaGenerator
from gpuplatform.rbac import required
from jobs import forms, gpus, manifests
from jobs.use import reclaim
from jobs.watch import watcher
from jobs.api.views import JobSerializer
from jobs.models import Job
from quotas.models import GpuFlavor
from tenants.models import Team
from tenants.admission import fragments, matched_resources, render_admission

schema = SchemaGenerator().get_schema(request=None, public=True)
enums = [s.get("enum", []) for s in schema["components"]["schemas"].values()]
team, flavor = Team(slug="t"), GpuFlavor(name="f", scheduler="kueue", gpus_per_node=8)
job = Job(team=team, flavor=flavor, kind="sweep", name="s", image="x", workers=8, min_replicas=2, gpus_per_worker=1)
print(json.dumps({
    "choices": Job.Kind.values,
    "presets": {key: values["kind"] for key, (label, values) in forms.PRESETS.items()},
    "schema_enums": [e for e in enums if "training" in e],
    "rbac": sorted(f"{g}/{r}:{','.join(sorted(v))}" for (g, r), v in required().items()),
    "pruned": [list(k) for k in manifests.JOB_KINDS],
    "watched": [list(k) for k, _ in watcher.WATCHED],
    "reclaimed": reclaim.WATCHED_KINDS,
    "sql": str(gpus.START_GPUS),
    "gpus": [job.total_gpus, job.gpus_to_start, job.size_words],
    "api": JobSerializer(context={}).to_representation(job)["runs_until_cancelled"],
    "matched": matched_resources(),
    "admitted": fragments().kinds(),
    "validations": render_admission()[0]["spec"]["validations"],
}))
"""


@pytest.fixture(scope="module")
def with_the_sample_kind() -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpuplatform.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", REGISTER_AND_REPORT], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_registered_kind_is_a_choice_of_the_model_the_form_and_the_api_schema(with_the_sample_kind):
    facts = with_the_sample_kind
    assert "sweep" in facts["choices"] and "sweep" not in Job.Kind.values
    assert facts["presets"]["sweep"] == "sweep"
    assert facts["schema_enums"] and all("sweep" in enum for enum in facts["schema_enums"])


def test_a_registered_kind_is_granted_pruned_and_watched(with_the_sample_kind):
    facts = with_the_sample_kind
    [granted] = [line for line in facts["rbac"] if line.startswith("/podtemplates:")]
    assert {"create", "patch", "delete", "list", "watch"} <= set(granted.split(":")[1].split(","))
    assert ["v1", "PodTemplate"] in facts["pruned"] and ["v1", "PodTemplate"] in facts["watched"]
    # None of the registered kinds renders or watches PodTemplates: the sample kind brought them.
    assert ("v1", "PodTemplate") not in JOB_KINDS and ("v1", "PodTemplate") not in dict(WATCHED)


def test_a_registered_kind_is_reclaimed_counted_and_told_to_gpuctl(with_the_sample_kind):
    facts = with_the_sample_kind
    assert "sweep" in facts["reclaimed"]
    assert "sweep" in facts["sql"]
    assert facts["gpus"] == [8, 2, "2–8 trials"]
    assert facts["api"] == "sweeping"


SWEEP_OWNS = "(o.kind == 'Sweep' && o.apiVersion.startsWith('sweep.example.org/'))"
IS_A_SWEEP = "(object.kind == 'Sweep' && object.apiVersion.startsWith('sweep.example.org/'))"


def test_a_registered_kind_is_matched_and_admitted_with_its_owner_chain_and_queue(with_the_sample_kind):
    facts = with_the_sample_kind
    assert facts["matched"]["sweep.example.org"] == ["sweeps"] and "Sweep" in facts["admitted"]
    # Its Pods may be owned by a Sweep, and nothing else may (the Sweep itself: by nothing).
    [owners] = [rule["expression"] for rule in facts["validations"] if rule["message"].startswith("Owner references")]
    pods, rest = owners.split("object.kind == 'Pod' ? ", 1)[1].split(" : ", 1)
    assert SWEEP_OWNS in pods and SWEEP_OWNS not in rest
    # It waits in one of the team's Kueue queues, in the rule of the other Kueue-queued kinds.
    [queued] = [rule for rule in facts["validations"] if IS_A_SWEEP in rule["expression"]]
    assert "(object.kind == 'StatefulSet'" in queued["expression"]
    assert "Sweep in a team namespace waits in one of the team's own Kueue queues" in queued["message"]
    assert "Sweep: a Sweep" in facts["validations"][0]["message"]
    # None of the registered kinds makes Sweeps: the sample kind brought them.
    assert "sweep.example.org" not in matched_resources()
    assert not any("Sweep" in rule["expression"] for rule in render_admission()[0]["spec"]["validations"])
