"""A job's rules, as small named checks: each looks at one concern and says, by field, what it
refuses, in plain words. `Job.clean` asks every one and reports every error (several on one
field too), so a person fixes a form in one round. The checks of one kind of work live in its
module (`workloads.kinds`, ``WorkKind.checks``) and are asked after these.

A check is ``check(job, flavor) -> {field: message}``; ``flavor`` is None when none is chosen.
"""

from workloads.pods import CHECKPOINT_GRACE_ENV, GPU_RUNTIME_ENV_NAMES, GPU_RUNTIME_ENV_PREFIXES
from workloads.spec import FIELDS, refused_on

from .. import gpus
from ..lifecycle import State
from .hardware import MPS_ENV_PREFIX

# Set by the platform for distributed training (a user value would break the rendezvous) and
# for the preemption contract (docs/preemption.md).
RESERVED_ENV_NAMES = frozenset(
    {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "NODE_RANK", "NNODES", "NPROC_PER_NODE",
     CHECKPOINT_GRACE_ENV}
)


def gpu_runtime_env_names(env) -> list[str]:
    """The names in `env` that the GPU container runtime would act on."""
    return sorted(name for name in env if name.upper().startswith(GPU_RUNTIME_ENV_PREFIXES)
                  or name.upper() in GPU_RUNTIME_ENV_NAMES)


def honoured_by_scheduler(job, flavor):
    """Settings the flavor's scheduler cannot honour (a priority on Volcano) are refused, rather
    than accepted and ignored."""
    return refused_on(flavor.scheduler, job) if flavor else {}


def kind_runs_on_flavor(job, flavor):
    allowed = job.work_kind.schedulers
    if flavor and flavor.scheduler not in allowed:
        return {"kind": f"{job.get_kind_display()} runs on {' or '.join(s.capitalize() for s in allowed)} "
                        f"flavors only; {flavor.name} is scheduled by {flavor.scheduler.capitalize()}."}
    return {}


def fields_of_other_kinds(job, flavor):
    """Settings only other kinds take (a Ray entrypoint on a training job) are refused when given."""
    mine = {field.name for field in job.work_kind.spec_fields}
    return {field.name: f"{job.get_kind_display()} does not take this; leave it empty."
            for field in FIELDS if field.refused_elsewhere and field.name not in mine and getattr(job, field.name)}


def worker_fits_a_node(job, flavor):
    why = gpus.too_big_for_a_node(job.gpus_per_worker, flavor) if flavor and job.gpus_per_worker else ""
    return {"gpus_per_worker": why} if why else {}


def priority_within_ceiling(job, flavor):
    if job.priority_id and job.team_id and not job.team.allows_priority(job.priority.value):
        return {"priority": (f"Team {job.team.slug} may use priorities up to {job.team.max_priority_value}; "
                             f"{job.priority.name} is {job.priority.value}. A quota manager can allow more.")}
    return {}


def _env_names(job) -> list[str]:
    return list(job.env) if isinstance(job.env, dict) else []


def env_not_reserved(job, flavor):
    if reserved := sorted(RESERVED_ENV_NAMES.intersection(_env_names(job))):
        return {"env": f"{', '.join(reserved)} is set by the platform; remove it."}
    return {}


def env_not_read_by_gpu_runtime(job, flavor):
    if runtime := gpu_runtime_env_names(_env_names(job)):
        return {"env": (f"{', '.join(runtime)} would be read by the GPU runtime and could expose GPUs this "
                        "job was not given; the platform assigns GPUs from the flavor. Remove it.")}
    return {}


def env_keeps_mps_share(job, flavor):
    if mps := sorted(name for name in _env_names(job) if name.upper().startswith(MPS_ENV_PREFIX)):
        return {"env": (f"{', '.join(mps)} would change the GPU share MPS gives this job; the platform sets "
                        "the share's limits from the flavor. Remove it.")}
    return {}


def runtime_within_limits(job, flavor):
    """A kind that has a max runtime gets its flavor's and priority class's default; a longer
    one than their cap is refused."""
    if flavor and job.work_kind.has_max_runtime and (why := job.runtime_within_limits()):
        return {"max_runtime_seconds": why}
    return {}


def hardware_gives_it(job, flavor):
    return job.hardware_problems(flavor) if flavor else {}


def outlives_no_drain(job, flavor):
    """A drained pool that cannot hold its queues (docs/drain.md) refuses what would outlive it."""
    if flavor and job.state in (State.DRAFT, State.SUBMITTED) and (drain := flavor.open_drain()):
        return drain.refusal(job)
    return {}


def volumes_mountable(job, flavor):
    return job.volume_problems()


CHECKS = (
    honoured_by_scheduler,
    kind_runs_on_flavor,
    fields_of_other_kinds,
    worker_fits_a_node,
    priority_within_ceiling,
    env_not_reserved,
    env_not_read_by_gpu_runtime,
    env_keeps_mps_share,
    runtime_within_limits,
    hardware_gives_it,
    outlives_no_drain,
    volumes_mountable,
)


def problems(job) -> dict[str, list[str]]:
    """Every error of every check (the job's own, then its kind's), by field, without repeats."""
    flavor = job.flavor if job.flavor_id else None
    found: dict[str, list[str]] = {}
    for check in (*CHECKS, *job.work_kind.checks):
        for name, message in check(job, flavor).items():
            said = found.setdefault(name, [])
            if message not in said:
                said.append(message)
    return found
