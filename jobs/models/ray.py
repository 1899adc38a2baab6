"""What a Ray job or cluster asks for, checked before it reaches the cluster (docs/ray.md):
Ray runs on Kueue flavors only (Kueue queues RayJobs and RayClusters; Volcano has no Ray
integration the platform uses), a RayJob needs its entrypoint, and its runtime environment is
a YAML mapping of bounded size. Mixed into `jobs.models.Job` (its fields: kind, flavor,
``ray_entrypoint``, ``ray_runtime_env``)."""

import yaml

from ..spec import RAY_JOB, RAY_KINDS, TEXT_BOUNDS, kind_schedulers

RAY_ENTRYPOINT_MAX_CHARS = 4096


def runtime_env_problem(text: str) -> str:
    """Why `text` is not a runtime environment Ray takes ("" when it is)."""
    if not text:
        return ""
    if len(text.encode()) > TEXT_BOUNDS.total_bytes:
        return f"At most {TEXT_BOUNDS.total_bytes // 1024} KiB of YAML."
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        return f"Not valid YAML{where}: give a mapping such as 'pip: [torch]'."
    if not isinstance(value, dict):
        return "Give a YAML mapping such as 'pip: [torch]' or 'env_vars: {A: b}'."
    return ""


class RayRules:
    @property
    def is_ray(self) -> bool:
        return self.kind in RAY_KINDS

    def need_words(self, gpus: int) -> str:
        """What a job needs to start, in words: "8 GPUs", or for Ray "head + 2 x 4 GPUs (8)"
        (the head holds none)."""
        if self.is_ray:
            return f"head + {self.workers} x {self.gpus_per_worker} GPUs ({gpus})"
        return f"{gpus} GPUs"

    def ray_problems(self, flavor) -> dict[str, str]:
        """Field errors of a Ray job's own settings on `flavor` (None: not chosen yet)."""
        errors = {}
        allowed = kind_schedulers(self.kind)
        if flavor and flavor.scheduler not in allowed:
            errors["kind"] = (f"{self.get_kind_display()} runs on {' or '.join(s.capitalize() for s in allowed)} "
                              f"flavors only; {flavor.name} is scheduled by {flavor.scheduler.capitalize()}.")
        if self.kind == RAY_JOB and not (self.ray_entrypoint or "").strip():
            errors["ray_entrypoint"] = "A Ray job needs the command it runs, e.g. python train.py."
        if self.kind == RAY_JOB and (why := runtime_env_problem(self.ray_runtime_env or "")):
            errors["ray_runtime_env"] = why
        if self.kind not in RAY_KINDS:
            for name in ("ray_entrypoint", "ray_runtime_env"):
                if getattr(self, name):
                    errors[name] = "Only Ray jobs take this; leave it empty."
        return errors
