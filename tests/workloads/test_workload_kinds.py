"""The kinds of work, registered once (`workloads.kinds.KINDS`), each on the schedulers it runs
on (`Integration`): each renders only what it declares, in objects the real schemas accept;
and every kind it renders or watches is granted to the platform (`gpuplatform.rbac.required`)
and followed by the status watcher (`jobs.watch.watcher.WATCHED`). The rest of the conformance
suite (shapes, stops, idle words, the test-only kind): `test_conformance.py`."""

import pytest

import workloads
from cluster import MANAGED_BY_LABEL, quantity
from core.ownership import JOB_LABEL
from gpuplatform.rbac import APPLY, WATCH, group, required, resource
from jobs.manifests import JOB_KINDS, job_fields, pod_templates_of, render_job
from jobs.models import Job
from jobs.watch.watcher import OURS, WATCHED
from tenants import admission
from tenants.manifests import render_limit_range
from workloads import spec, trainer
from workloads.kinds import (
    KINDS,
    for_job,
    inference,
    integrations,
    notebook,
    ray_cluster,
    ray_job,
    rendered_kinds,
    train_job,
    training,
)
from workloads.kinds.admission import Queue
from workloads.kueue import QUEUE_LABEL
from workloads.pods import APP_COMPONENT_LABEL, APP_INSTANCE_LABEL, APP_NAME_LABEL, HOME_SCRATCH, object_name

from ..builders import make_flavor, make_job, make_quota, make_team
from ..schemas import validate
from ..security import assert_hardened

# Jobs of each job kind that together make every object its kind can render.
SHAPES = {
    training.NAME: [dict(workers=1), dict(workers=3, gpus_per_worker=2, max_runtime_seconds=3600)],
    inference.NAME: [dict(port=8000, min_replicas=1, max_replicas=1),
                     dict(port=8000, min_replicas=1, max_replicas=3, readiness_path="/healthz"),
                     dict(port=8000, min_replicas=1, max_replicas=3, autoscale_metric="gpu",
                          target_gpu_utilization_percent=60)],
    ray_job.NAME: [dict(workers=1, ray_entrypoint="python train.py"),
                   dict(workers=4, gpus_per_worker=2, ray_entrypoint="python -m tune --trials 8",
                        ray_runtime_env="pip: [torch]\nenv_vars: {A: b}\n", max_runtime_seconds=3600)],
    ray_cluster.NAME: [dict(workers=2, gpus_per_worker=4)],
    notebook.NAME: [dict(command=[], args=[]), dict(gpus_per_worker=2, port=8080, max_runtime_seconds=3600)],
    train_job.NAME: [dict(workers=1, training_runtime=train_job.TORCH_RUNTIME),
                     dict(workers=2, gpus_per_worker=4, max_runtime_seconds=3600,
                          training_runtime=train_job.TORCH_RUNTIME, command=[], args=[])],
}
def admitted_by_the_team_policy(obj: dict, integration) -> bool:
    """Whether the team namespaces' admission policy (`tenants.admission`) holds what makes pods
    (or is a Service) to the integration's own fragment (`Integration.admits`): declared there
    as rendered, with the queue it names, and so matched and admitted; a kind the policy does
    not match would run unguarded, one it matches but does not admit never runs."""
    declared = {admitted.kind: admitted for admitted in integration.admits}
    makes = declared.get((obj["apiVersion"], obj["kind"]))
    # A TrainJob has no pod template of its own: its controller's JobSet does (declared as made).
    if not pod_templates_of(obj) and obj["kind"] != "Service" and not (makes and makes.makes):
        return (obj["apiVersion"], obj["kind"]) not in declared
    admitted = declared.get((obj["apiVersion"], obj["kind"]))
    return (admitted is not None and (not admitted.queue or any(_names_queue(obj, queue) for queue in admitted.queue))
            and resource(obj["kind"]) in admission.matched_resources().get(group(obj["apiVersion"]), [])
            and obj["kind"] in admission.fragments().kinds())


def _names_queue(obj: dict, queue: Queue) -> bool:
    """Whether ``obj`` names a queue the way its fragment says (the policy checks it is the team's)."""
    if queue == Queue.KUEUE:
        return bool(obj["metadata"].get("labels", {}).get(QUEUE_LABEL))
    if queue == Queue.VOLCANO:
        return bool(obj["spec"].get("queue"))
    return all(t["spec"].get("schedulerName") == "volcano" for t in pod_templates_of(obj))


APP_LABELS = (APP_NAME_LABEL, APP_INSTANCE_LABEL, APP_COMPONENT_LABEL, MANAGED_BY_LABEL)


def assert_recommended_labels(objects: list[dict], job) -> None:
    """Every object and pod template carries Kubernetes' recommended labels (the kind of work,
    the job's objects' name, a component) and no selector names them: a Deployment's or
    StatefulSet's selector cannot change on the cluster, so selectors stay the job label alone."""
    for obj in objects:
        templates = pod_templates_of(obj) + ([trainer.pod_template_of(obj)] if obj["kind"] == "TrainJob" else [])
        for labels in [obj["metadata"]["labels"], *(t["metadata"]["labels"] for t in templates)]:
            assert set(APP_LABELS) <= set(labels), (obj["kind"], labels)
            assert labels[APP_NAME_LABEL] == job.kind and labels[APP_INSTANCE_LABEL] == object_name(job)
        selector = (obj.get("spec") or {}).get("selector") or {}
        assert not set(selector.get("matchLabels", selector)) & set(APP_LABELS[:3]), (obj["kind"], selector)
        if obj["kind"] in ("Deployment", "StatefulSet"):
            assert selector == {"matchLabels": {JOB_LABEL: str(job.pk)}}, obj["kind"]


def assert_local_disk_of_the_team_limit_range(objects: list[dict], job) -> None:
    """Every container states its ephemeral-storage request and limit, the numbers of the team
    namespace's LimitRange (read from it, not copied), and the limit holds the home scratch."""
    [defaults] = render_limit_range(job.team)["spec"]["limits"]
    request, limit = defaults["defaultRequest"]["ephemeral-storage"], defaults["default"]["ephemeral-storage"]
    assert quantity.parse(limit)[0] > quantity.parse(HOME_SCRATCH)[0]
    for obj in objects:
        templates = pod_templates_of(obj) + ([trainer.pod_template_of(obj)] if obj["kind"] == "TrainJob" else [])
        resources = [c["resources"] for t in templates for c in t["spec"]["containers"] if "resources" in c]
        if obj["kind"] == "TrainJob":  # the runtime patch leaves the node's resources to resourcesPerNode
            resources.append(obj["spec"]["trainer"]["resourcesPerNode"])
        assert len(resources) >= len(templates), obj["kind"]
        for found in resources:
            assert found["requests"]["ephemeral-storage"] == request, obj["kind"]
            assert found["limits"]["ephemeral-storage"] == limit, obj["kind"]


CASES = [(kind, integration) for kind in KINDS for integration in kind.integrations]


def test_every_kind_is_a_choice_and_runs_on_each_scheduler_at_most_once():
    assert set(spec.SCHEDULERS) == set(workloads.SCHEDULERS)
    assert [kind.name for kind in KINDS] == list(Job.Kind.values)
    for kind in KINDS:
        assert len(kind.schedulers) == len(set(kind.schedulers)) >= 1, kind.name
        assert set(kind.schedulers) <= set(spec.SCHEDULERS), kind.name


def test_kinds_have_distinct_names():
    assert len({kind.name for kind in KINDS}) == len(KINDS)


@pytest.mark.django_db
@pytest.mark.parametrize(("work", "kind"), CASES, ids=[f"{k.name} on {i.scheduler}" for k, i in CASES])
def test_each_kind_renders_only_its_declared_kinds_in_objects_the_schemas_accept(work, kind, fake, settings):
    scheduler = kind.scheduler
    settings.PROMETHEUS_URL = "http://prometheus.example:9090"  # with KEDA on the (fake) cluster: GPU scaling
    settings.NOTEBOOK_INGRESS_HOST = "{job}-{team}.notebooks.example.org"  # a notebook's Ingress too
    team, flavor = make_team(), make_flavor(f"pool-{scheduler}", scheduler=scheduler)
    make_quota(team, flavor, nominal_gpus=8)  # a notebook fits the team's own quota or is refused
    made = set()
    for number, shape in enumerate(SHAPES[work.name]):
        job = make_job(team, flavor, name=f"job-{number}", kind=work.name, **shape)
        assert for_job(job) is kind
        objects = render_job(job)
        assert objects == kind.render(job)
        assert job_fields(job) == kind.fields
        for obj in objects:
            validate(obj)
            assert admitted_by_the_team_policy(obj, kind), f"{obj['kind']}: the admission policy would refuse it"
            assert (obj["apiVersion"], obj["kind"]) in kind.renders, obj["kind"]
            made.add((obj["apiVersion"], obj["kind"]))
        assert assert_hardened(objects, job) >= 1
        assert_recommended_labels(objects, job)
        assert_local_disk_of_the_team_limit_range(objects, job)
    assert made == set(kind.renders)
    # What its fragment says it renders, it renders.
    assert {admitted.kind for admitted in kind.admits} <= made
    # What it watches by our labels is what a job renders (a RayJob's RayCluster is KubeRay's,
    # labelled like its RayJob: it is a kind the ray-cluster kind renders); its field rules name
    # kinds it renders.
    assert {watched for watched, labelled in kind.watched if labelled} <= set(JOB_KINDS)
    assert set(kind.fields) <= {(group(api_version), name) for api_version, name in made}


@pytest.mark.parametrize("kind", integrations(), ids=[f"{k.name} on {k.scheduler}" for k in integrations()])
def test_every_kind_a_workload_kind_renders_or_watches_is_granted_and_pruned(kind):
    needs = required()
    for api_version, name in kind.renders:
        assert APPLY <= needs.get((group(api_version), resource(name)), set()), name
        assert (api_version, name) in JOB_KINDS
    for (api_version, name), _labelled in kind.watched:
        assert WATCH <= needs.get((group(api_version), resource(name)), set()), name


@pytest.mark.parametrize("kind", integrations(), ids=[f"{k.name} on {k.scheduler}" for k in integrations()])
def test_the_status_watcher_follows_every_kind_a_workload_kind_watches(kind):
    watched = dict(WATCHED)
    for watched_kind, labelled in kind.watched:
        assert watched_kind in watched, watched_kind
        assert watched[watched_kind] == (OURS if labelled else None)


def test_prune_looks_through_every_rendered_kind_once():
    assert JOB_KINDS == rendered_kinds()
    assert len(set(JOB_KINDS)) == len(JOB_KINDS)
    assert set(JOB_KINDS) == {rendered for kind in integrations() for rendered in kind.renders}


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_a_kinds_spec_fields_are_the_common_ones_and_those_it_takes_on_its_schedulers(kind):
    names = {field.name for field in kind.spec_fields}
    assert set(kind.takes) <= set(spec.NAMES) and set(kind.requires) <= set(kind.takes), kind.name
    for field in spec.FIELDS:
        applies = (field.common or field.name in kind.takes) and bool(set(field.schedulers) & set(kind.schedulers))
        assert (field.name in names) == applies, field.name


def test_a_server_takes_no_workers_and_ray_kinds_no_port():
    by_name = {kind.name: {field.name for field in kind.spec_fields} for kind in KINDS}
    assert "workers" not in by_name[inference.NAME] and "port" in by_name[inference.NAME]
    assert "port" not in by_name[ray_job.NAME] and "ray_entrypoint" in by_name[ray_job.NAME]
