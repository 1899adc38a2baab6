"""Every preset of the submit form runs on every scheduler: each ``$(VAR)`` its command and
arguments use is set in the pods it renders (by us, or by the Volcano plugins the job
names), and what the preview shows reads as plain YAML."""

import re

import pytest

from jobs.forms import PRESETS, JobForm
from jobs.manifests import render_job
from jobs.web.views import _yaml
from quotas.models import PriorityClass, Scheduler
from workloads.kinds import by_name
from workloads.pods import pod_templates_of

from ..builders import make_flavor, make_job, make_quota

pytestmark = pytest.mark.django_db

# What Volcano's job plugins add to every container of a job that names them
# (volcano.sh/volcano pkg/controllers/job/plugins): appended after the container's own.
PLUGIN_ENV = {
    "pytorch": {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"},
    "env": {"VK_TASK_INDEX", "VC_TASK_INDEX"},
}
REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def preset_job(member, team, flavor, preset: str):
    """The job a person submits from the preset, unchanged, through the form."""
    values = dict(PRESETS[preset][1])
    if by_name(values["kind"]).stoppable and not team.quotas.filter(flavor=flavor).exists():
        make_quota(team, flavor, nominal_gpus=8)  # a notebook fits the team's own quota or is refused
    data = {**values, "team": team.pk, "flavor": flavor.pk, "priority": ""}
    data = {name: "" if value is None else value for name, value in data.items()}
    form = JobForm(data, user=member)
    assert form.is_valid(), form.errors
    job = form.unsaved_job()
    job.save()
    return job


def unresolved(objects: list[dict]) -> dict[str, set[str]]:
    """Per container, the variables its command and args use that nothing sets."""
    missing = {}
    for obj in objects:
        plugins = (obj.get("spec") or {}).get("plugins") or {}
        from_plugins = set().union(*(PLUGIN_ENV.get(name, set()) for name in plugins))
        for template in pod_templates_of(obj):
            for container in template["spec"]["containers"]:
                used = set(REFERENCE.findall(" ".join(container.get("command", []) + container.get("args", []))))
                known = {entry["name"] for entry in container.get("env", [])} | from_plugins
                if used - known:
                    missing[f"{obj['kind']}/{container['name']}"] = used - known
    return missing


# Every preset on every scheduler its kind runs on (Ray: Kueue only, `WorkKind.schedulers`).
CASES = [(preset, scheduler) for preset in sorted(PRESETS) for scheduler in (Scheduler.KUEUE, Scheduler.VOLCANO)
         if scheduler in by_name(PRESETS[preset][1]["kind"]).schedulers]


@pytest.mark.parametrize(("preset", "scheduler"), CASES)
def test_every_variable_a_preset_uses_is_set_on_every_scheduler(member, team, scheduler, preset):
    flavor = make_flavor(f"pool-{scheduler}", scheduler=scheduler)
    job = preset_job(member, team, flavor, preset)
    assert unresolved(render_job(job)) == {}


def test_the_ddp_preset_is_a_multi_node_gang_that_numbers_its_nodes_itself(member, team):
    flavor = make_flavor("v100", scheduler=Scheduler.VOLCANO)
    job = preset_job(member, team, flavor, "ddp")
    assert job.workers > 1
    assert "--rdzv-backend=c10d" in job.args and not any("NODE_RANK" in arg for arg in job.args)
    (vcjob,) = render_job(job)
    for task in vcjob["spec"]["tasks"]:
        env = {e["name"]: e.get("value") for e in task["template"]["spec"]["containers"][0]["env"]}
        assert env["NNODES"] == str(job.workers) and env["NPROC_PER_NODE"] == str(job.gpus_per_worker)


def test_a_multi_worker_volcano_preview_has_no_yaml_aliases(member, team):
    flavor = make_flavor("v100", scheduler=Scheduler.VOLCANO)
    job = preset_job(member, team, flavor, "ddp")
    objects = render_job(job)
    text = _yaml(objects)
    assert "&id" not in text and "*id" not in text
    # Nor in the objects themselves: each task its own, so no YAML writer can alias them.
    master, worker = objects[0]["spec"]["tasks"]
    assert master["template"]["spec"]["containers"][0]["env"] is not worker["template"]["spec"]["containers"][0]["env"]


def test_a_kueue_inference_servers_pods_carry_its_queue_and_priority(member, team, flavor):
    team.max_priority_value = 100
    team.save()
    urgent = PriorityClass.objects.create(name="urgent", value=100)
    job = make_job(team, flavor, name="serve", kind="inference", port=8000, min_replicas=1, max_replicas=2,
                   priority=urgent)
    deployment = next(obj for obj in render_job(job) if obj["kind"] == "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["kueue.x-k8s.io/priority-class"] == "urgent"
    assert pod_labels["kueue.x-k8s.io/queue-name"] == deployment["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]


def test_a_volcano_inference_servers_pods_carry_no_kueue_labels(member, team):
    flavor = make_flavor("v100", scheduler=Scheduler.VOLCANO)
    job = make_job(team, flavor, name="serve", kind="inference", port=8000, min_replicas=1, max_replicas=1)
    deployment = next(obj for obj in render_job(job) if obj["kind"] == "Deployment")
    assert not any(key.startswith("kueue.") for key in deployment["spec"]["template"]["metadata"]["labels"])
