"""Property: every job input the model accepts renders to schema-valid objects that keep
every security invariant, whatever the user typed."""

import string

from django.core.exceptions import ValidationError
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cluster.names import is_dns1035_label
from jobs.manifests import render_job
from jobs.models import Job
from quotas.models import GpuFlavor, Scheduler
from tenants.models import Team

from ..schemas import validate
from ..security import assert_hardened

dns_label = st.from_regex(r"\A[a-z]([-a-z0-9]{0,38}[a-z0-9])?\Z")
# Any DNS-1123 label, digits first too: the model decides which a job may be called.
job_name = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?\Z")
# Any printable text of any script, tabs, line breaks and the zero-width joiners; the model
# refuses control and other invisible formatting characters (core.validators.hidden_character).
text = st.text(st.characters(exclude_categories=("Cs", "Cc", "Cf"), include_characters="\t\n\r\u200c\u200d"),
               max_size=40)
env_name = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,20}\Z")
# References of the distribution grammar, half the time; else any ASCII the model may refuse.
_component = st.from_regex(r"\A[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*\Z").filter(lambda c: len(c) <= 30)
_reference = st.builds(
    lambda registry, path, tag: registry + "/".join(path) + tag,
    st.sampled_from(["", "ghcr.io/", "localhost:5000/", "nvcr.io:443/"]), st.lists(_component, min_size=1, max_size=3),
    st.sampled_from(["", ":1", ":2.5.1-cuda12.4", ":latest", "@sha256:" + "a" * 64]))
image = _reference | st.text(string.ascii_letters + string.digits + "./:-_@", min_size=1, max_size=60)

FLAVORS = [
    GpuFlavor(name="h100", resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8,
              scheduler=Scheduler.KUEUE, node_labels={"gpuplatform.io/pool": "h100"},
              tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
    GpuFlavor(name="a100", resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8,
              scheduler=Scheduler.VOLCANO, node_labels={"gpuplatform.io/pool": "a100"}),
    GpuFlavor(name="mig-1g-10gb", resource_name="nvidia.com/mig-1g.10gb", gpu_memory_gib=10, gpus_per_node=14,
              scheduler=Scheduler.KUEUE, node_labels={"gpuplatform.io/pool": "mig"}),
]


@st.composite
def jobs(draw):
    flavor = draw(st.sampled_from(FLAVORS))
    team = Team(pk=1, slug=draw(dns_label), display_name="t")
    kind = draw(st.sampled_from([Job.Kind.TRAINING, Job.Kind.INFERENCE]))
    fields = dict(
        pk=draw(st.integers(1, 10**9)), team=team, flavor=flavor, kind=kind, name=draw(job_name),
        image=draw(image), command=draw(st.lists(text, max_size=4)), args=draw(st.lists(text, max_size=6)),
        env=draw(st.dictionaries(env_name, text, max_size=5)),
        gpus_per_worker=draw(st.integers(1, flavor.gpus_per_node)),
        cpu_per_worker=draw(st.decimals(min_value="0.1", max_value="128", places=2)),
        memory_per_worker_gib=draw(st.integers(1, 2048)),
        max_runtime_seconds=draw(st.none() | st.integers(60, 10**7)),
    )
    if kind == Job.Kind.INFERENCE:
        low = draw(st.integers(1, 8))
        fields.update(workers=1, port=draw(st.integers(1, 65535)), min_replicas=low,
                      max_replicas=draw(st.integers(low, 16)), readiness_path="/" + draw(st.text(string.ascii_letters, max_size=10)),
                      readiness_initial_delay_seconds=draw(st.integers(0, 900)),
                      autoscaling_target_cpu_percent=draw(st.none() | st.integers(1, 100)))
    else:
        fields["workers"] = draw(st.integers(1, 256))
    return Job(**fields)


# Most drawn jobs are refused by the model's own validation (that is the filter: only what it
# accepts must render valid objects), so a run may filter far more than it keeps.
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(jobs())
def test_every_accepted_job_renders_valid_hardened_objects(job):
    try:
        job.full_clean(exclude=["team", "flavor", "priority", "submitter"], validate_unique=False,
                       validate_constraints=False)
    except ValidationError:
        assume(False)
    objects = render_job(job)
    for obj in objects:
        validate(obj)
        if obj["kind"] == "Service":  # Service names are DNS-1035: a letter first
            assert is_dns1035_label(obj["metadata"]["name"]), obj["metadata"]["name"]
    assert assert_hardened(objects, job) >= 1
