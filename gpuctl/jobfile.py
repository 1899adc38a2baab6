"""Read a job file (YAML) into the body of ``POST /api/v1/jobs``.

The file is the API's job fields, one per key (see docs/api.md). Mistakes the file itself
makes (not a mapping, an unknown key, a string where a list belongs) are reported here,
before anything is sent; the server checks everything else.
"""

import yaml

FIELDS = {
    "team", "name", "kind", "flavor", "priority", "image", "command", "args", "env", "workers",
    "gpus_per_worker", "gpu_memory_gib", "placement", "cpu_per_worker", "memory_per_worker_gib", "max_runtime_seconds",
    "port", "min_replicas", "max_replicas", "readiness_path", "readiness_initial_delay_seconds",
    "model_load_seconds", "autoscaling_target_cpu_percent", "autoscale_metric", "target_gpu_utilization_percent", "volumes",
    "ray_entrypoint", "ray_runtime_env", "training_runtime",
}
LISTS = ("command", "args")


class JobFileError(Exception):
    pass


def load(text: str, *, team: str | None = None) -> dict:
    """The job file's fields as the API takes them, `team` (--team) over the file's."""
    spec = _mapping(text)
    _as_api_values(spec)
    if team:
        spec["team"] = team
    if not spec.get("team"):
        raise JobFileError("no team: add 'team: <slug>' to the file or pass --team.")
    return spec


def _mapping(text: str) -> dict:
    """The file as a mapping of known job fields."""
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise JobFileError(f"not valid YAML: {err}") from None
    if not isinstance(spec, dict):
        raise JobFileError("the file must be a mapping of job fields (name: ..., image: ...).")
    unknown = sorted(set(spec) - FIELDS)
    if unknown:
        raise JobFileError(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(FIELDS))}.")
    return spec


def _as_api_values(spec: dict) -> None:
    """Check the fields whose shape the file can get wrong, and write them as the API takes them."""
    for field in LISTS:
        if field in spec and not (isinstance(spec[field], list) and all(isinstance(v, (str, int, float)) for v in spec[field])):
            raise JobFileError(f"{field} must be a list of strings, e.g. {field}: [python, train.py].")
        if field in spec:
            spec[field] = [str(v) for v in spec[field]]
    if "env" in spec:
        if not isinstance(spec["env"], dict):
            raise JobFileError("env must be a mapping of names to values, e.g. env: {EPOCHS: '3'}.")
        # YAML reads 3 and true as numbers and booleans; environment values are strings.
        spec["env"] = {str(k): _env_value(v) for k, v in spec["env"].items()}
    if isinstance(spec.get("ray_runtime_env"), dict):
        # Written as a mapping in the file; the API takes Ray's runtime environment as YAML text.
        spec["ray_runtime_env"] = yaml.safe_dump(spec["ray_runtime_env"], sort_keys=False)
    if "volumes" in spec and not (isinstance(spec["volumes"], dict)
                                  and all(isinstance(v, str) for v in spec["volumes"].values())):
        raise JobFileError("volumes must be a mapping of volume names to mount paths, e.g. volumes: {datasets: /data}.")


def _env_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
