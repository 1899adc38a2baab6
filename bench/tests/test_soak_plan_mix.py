"""The soak's mix, derived from each kind's place in it (`WorkKind.soak`, bench/soak/plan.py):
today's eight variants, their flavors, which live until cancelled, how many of each a run
plans and the fields each job of them sets."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.soak import plan, timeline
from bench.soak.profile import load
from workloads.kinds import notebook, ray_cluster, ray_job

RAY_JOB, RAY_CLUSTER = ("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster")


def test_the_mix_is_each_kind_on_each_scheduler_it_names_in_the_registrys_order():
    assert list(plan.KINDS.items()) == [
        ("kueue-training", ("training", "h100")), ("volcano-training", ("training", "a100")),
        ("kueue-inference", ("inference", "t4-shared")), ("volcano-inference", ("inference", "mig-1g-10gb")),
        ("kueue-rayjob", ("ray-job", "h100")), ("kueue-raycluster", ("ray-cluster", "h100")),
        ("kueue-notebook", ("notebook", "t4-shared")), ("kueue-trainjob", ("train-job", "h100")),
    ]
    assert plan.LONG_LIVED == {"kueue-rayjob", "kueue-raycluster", "kueue-notebook"}
    # What a long-lived variant's account reads: the object Kueue queues.
    assert timeline.LONG_LIVED == {"kueue-rayjob": RAY_JOB, "kueue-raycluster": RAY_CLUSTER,
                                   "kueue-notebook": ("apps/v1", "StatefulSet")}
    # The ones that end by themselves are read by the object Kueue queues, a batch Job or a TrainJob.
    assert timeline.RUNS_TO_AN_END == {"kueue-training": ("batch/v1", "Job"),
                                       "kueue-trainjob": ("trainer.kubeflow.org/v1alpha1", "TrainJob")}
    # Kueue admits and preempts them whole; a service's pods one by one.
    assert plan.EVICTED_WHOLE == {"kueue-training", "kueue-trainjob", *plan.LONG_LIVED}


def test_names_stay_apart_when_two_kinds_begin_alike():
    # "training" and "trainjob" both begin "train": each name as long as it needs to differ.
    assert plan.short_names(["kueue-training", "kueue-trainjob", "volcano-training", "kueue-notebook"]) == {
        "kueue-training": "kue-traini", "kueue-trainjob": "kue-trainj", "volcano-training": "vol-train",
        "kueue-notebook": "kue-noteb"}
    profile = load({"SOAK_MINUTES": "2"})
    names = [(item.team, item.body["name"]) for item in plan.build(profile)]
    assert len(names) == len(set(names))  # a team's job names never repeat across the mix


def test_a_run_plans_every_variant_and_a_quarter_of_each_long_lived_one():
    profile = load({"SOAK_MINUTES": "2"})
    planned = plan.build(profile)
    counts = Counter(item.label for item in planned)
    assert set(counts) == set(plan.KINDS)
    for label in plan.KINDS:
        wanted = max(2, profile.jobs_per_kind // 4) if label in plan.LONG_LIVED else profile.jobs_per_kind
        assert counts[label] >= wanted == plan.wanted(label, profile), label
    # Notebooks all at the start, one after the other (they must fit the team's own free quota).
    notebooks = [item.at for item in planned if item.label == "kueue-notebook"]
    assert notebooks == [profile.at(0.02) + 2 * i for i in range(len(notebooks))]


def test_each_job_sets_the_fields_its_kind_declares_for_the_soak():
    bodies = {}
    for item in plan.build(load({"SOAK_MINUTES": "2"})):
        bodies.setdefault(item.label, item.body)
    assert bodies["kueue-rayjob"]["ray_entrypoint"] == "python train.py" and bodies["kueue-rayjob"]["workers"] == 1
    assert bodies["kueue-raycluster"]["workers"] == 1 and bodies["kueue-notebook"]["port"] == 8888
    for label in plan.LONG_LIVED:  # the image's own entrypoint, no fake end
        assert bodies[label]["command"] == [] and bodies[label]["env"] == {"SOAK": "1"}
    for label in ("kueue-inference", "volcano-inference"):
        assert bodies[label]["args"] == ["serve.py"] and bodies[label]["readiness_path"] == "/healthz"
    assert bodies["kueue-training"]["args"] == ["train.py"] and "port" not in bodies["kueue-training"]
    # A TrainJob names the runtime the local cluster installs and ends by itself, as training does.
    assert bodies["kueue-trainjob"]["training_runtime"] == "torch-distributed"
    assert bodies["kueue-trainjob"]["args"] == bodies["kueue-training"]["args"]
    # Priorities are Kueue's: none on Volcano.
    assert "priority" in bodies["kueue-inference"] and "priority" not in bodies["volcano-inference"]
    assert {bodies[label]["kind"] for label in plan.LONG_LIVED} == {ray_job.NAME, ray_cluster.NAME, notebook.NAME}


# The test-only kind of the conformance suite (tests/workloads/sample_kind.py), registered in
# a process of its own: one registry line gives it a place in the soak, no other file touched.
WITH_THE_SAMPLE_KIND = """
import json
import workloads.kinds as registry
from tests.workloads import sample_kind
registry.KINDS = (*registry.KINDS, sample_kind.KIND)
from bench.soak import plan
from bench.soak.profile import load
planned = plan.build(load({"SOAK_MINUTES": "2"}))
print(json.dumps({"soak": plan.KINDS, "planned": [[p.label, p.body] for p in planned if p.label == "kueue-sweep"]}))
"""


def test_a_kind_registered_alone_has_its_place_in_the_soak():
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpuplatform.settings", "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", WITH_THE_SAMPLE_KIND], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts["soak"]["kueue-sweep"] == ["sweep", "h100"]
    assert {label: list(kind) for label, kind in plan.KINDS.items()} == {
        label: kind for label, kind in facts["soak"].items() if label != "kueue-sweep"}
    # As many as every kind that is not long-lived, with the fields it declared; it runs until
    # cancelled, so most are cancelled after a while.
    assert len(facts["planned"]) == load({"SOAK_MINUTES": "2"}).jobs_per_kind
    assert all(body["kind"] == "sweep" and body["min_replicas"] == 1 and body["priority"] for _, body in facts["planned"])
