"""What the CI pipelines of the soak submit, when, and what happens to each job later.

A plan is a list of ``Planned`` jobs, fixed by the seed, with times in seconds from the
start of the run. The mix is the registry's: each kind of work says its place in the soak
(`WorkKind.soak`: a flavor of the local cluster per scheduler, each a variant labelled
"<scheduler>-<kind>", the fields of its own, whether it lives until cancelled), at least
``wanted`` of each variant: today training on Kueue (H100) and on Volcano (A100), inference on
Kueue (time-sliced T4) and on Volcano (MIG slices), Ray jobs, Ray clusters, notebooks and
TrainJobs on Kueue. On top of jobs at random times, scenes make sure the run exercises what it claims:

- borrow: team vision fills its H100 quota and borrows the idle part of nlp's (cohort);
- preempt: high-priority vision jobs arrive while low-priority ones hold every GPU, and
  nlp takes back what vision borrowed (reclaim within the cohort);
- long: jobs that run longer than the whole soak, so they live through every sweep, the
  worker kill and the API-server restart;
- max runtime: Kueue jobs that outlive their max runtime and are stopped (failed);
- scale: one inference service per scheduler is scaled by an "HPA" (field manager
  soak-hpa, scale subresource) and must keep that replica count;
- long-lived kinds: Ray jobs and clusters (KubeRay) and notebooks (a StatefulSet), a quarter of
  the number of each other kind, cancelled after a while;
- idle GPUs: Volcano jobs whose fake GPUs the exporter reports idle (at 1 %, or at 0 % with
  their memory held) must be reclaimed, and busy ones (steady, bursty with gaps shorter
  than a window, or a gang with one busy rank) never (``IDLE_SCENES``; checks.idle_rows).

Nothing is submitted or cancelled inside a quiet window (see ``quiet_windows``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import workloads.kinds
from workloads import Kind as ObjectKind
from workloads.kinds import WorkKind
from workloads.kinds.admission import Queue
from workloads.spec import KUEUE

from .profile import Profile


@dataclass(frozen=True)
class Variant:
    """A kind of work on one scheduler, as the soak runs it (``label``: "kueue-training")."""

    label: str
    kind: WorkKind
    scheduler: str
    flavor: str

    @property
    def queued(self) -> ObjectKind:
        """The object of it Kueue queues (what a long-lived variant's account reads)."""
        integration = self.kind.on(self.scheduler)
        return next(a.kind for a in integration.admits if Queue.KUEUE in a.queue and a.makes)


def variants(kinds: tuple[WorkKind, ...]) -> dict[str, Variant]:
    """Each kind's place in the soak (`WorkKind.soak`), on each scheduler it names, in the registry's order."""
    return {v.label: v for v in (
        Variant(f"{i.scheduler}-{kind.name.replace('-', '')}", kind, i.scheduler, kind.soak.flavors[i.scheduler])
        for kind in kinds if kind.soak for i in kind.integrations if i.scheduler in kind.soak.flavors)}


def short_names(labels) -> dict[str, str]:
    """label -> the stem of its jobs' names ("kueue-training" -> "kue-train"): the kind's part
    as short as it stays apart from every other label's ("kue-traini", "kue-trainj")."""
    parts = {label: (label.split("-")[0][:3], label.split("-", 1)[1]) for label in labels}

    def stem(label: str, size: int) -> tuple[str, str]:
        scheduler, kind = parts[label]
        return scheduler, kind[:size]

    names = {}
    for label in labels:
        size = 5
        while size < len(parts[label][1]) and any(
                stem(other, size) == stem(label, size) for other in labels if other != label):
            size += 1
        names[label] = "-".join(stem(label, size))
    return names


VARIANTS = variants(workloads.kinds.KINDS)
NAMES = short_names(VARIANTS)
KINDS = {label: (v.kind.name, v.flavor) for label, v in VARIANTS.items()}  # label: (job kind, flavor)
# Kinds that run until cancelled (issue 31), fewer of each (`wanted`): nothing runs inside
# kwok's pods, so they end only by a cancel.
LONG_LIVED = {label for label, v in VARIANTS.items() if v.kind.soak.long_lived}
# What Kueue admits, and may preempt, as a whole (a service's pods are admitted one by one).
EVICTED_WHOLE = {label for label, v in VARIANTS.items()
                 if v.scheduler == KUEUE and (label in LONG_LIVED or not v.kind.runs_until_cancelled)}


def wanted(label: str, profile: Profile) -> int:
    """Jobs of a label the plan submits at least: every kind's number, a quarter of it (at
    least 2) for the long-lived kinds."""
    return max(2, profile.jobs_per_kind // 4) if label in LONG_LIVED else profile.jobs_per_kind
IMAGE = "ghcr.io/example/soak:1"
SUBMIT_UNTIL = 0.75   # fraction of the run: the last submission
ACTIVE_UNTIL = 0.80   # the last cancellation or scale; then the run settles
WORKER_KILL_AT = 0.35
APISERVER_RESTART_AT = 0.60
SCALE_AT = 0.15
SCALED_REPLICAS = 3
# scene -> the env that steers its GPUs in the local cluster's exporter (GPU_SIM_*).
_BURSTS = "0:90,2:0/6"  # 2 s at 90 % every 6 s, for as long as the job runs
IDLE_SCENES = {
    "idle": {"GPU_SIM_UTIL": "1"},
    "idle-memory-squatting": {"GPU_SIM_UTIL": "0", "GPU_SIM_MEM_MIB": "60000"},
    "busy-steady": {"GPU_SIM_UTIL": "80"},
    "busy-bursty": {"GPU_SIM_UTIL": _BURSTS},
    # A gang whose rank 0 (the master: RANK from Volcano's pytorch plugin) is busy and the
    # other rank idle: one busy rank keeps the job busy.
    "busy-one-rank": {"GPU_SIM_UTIL": "rank0=90;*=1"},
}
# Scenes run as gangs of this many workers (the others as one); the one-busy-rank gang in
# nlp, whose A100s no other scene holds for the whole run.
SCENE_WORKERS = {"idle": 2, "busy-one-rank": 2}
SCENE_TEAMS = {"busy-one-rank": "nlp"}


@dataclass
class Planned:
    key: str               # Idempotency-Key, as a CI run id would be
    at: float              # seconds from the start
    team: str
    label: str             # one of KINDS
    body: dict
    cancel_at: float | None = None
    scale_at: float | None = None
    scene: str = "random"
    job_id: int | None = None
    submitted_at: float | None = None
    cancelled_at: float | None = None
    notes: list[str] = field(default_factory=list)


def quiet_windows(profile: Profile) -> list[tuple[float, float]]:
    """Spans (seconds) in which nothing is submitted, cancelled or scaled: a mid-run one in
    the full profile, and the end of every run."""
    windows = [(profile.at(ACTIVE_UNTIL), float("inf"))]
    if profile.full:
        windows.insert(0, (profile.at(0.45), profile.at(0.45) + max(45.0, 6 * profile.sweep_seconds)))
    return windows


def _outside(t: float, windows) -> float:
    for start, end in windows:
        if start <= t < end:
            return end + 1.0
    return t


def _duration(seconds: float) -> str:
    return f"{max(1, int(seconds))}s"


def _body(team: str, label: str, name: str, rng: random.Random, *, seconds: float, priority: str = "normal",
          workers: int = 1, gpus: int = 1, max_replicas: int = 1, max_runtime: int | None = None) -> dict:
    variant = VARIANTS[label]
    fields = variant.kind.soak.fields(workers, max_replicas)
    body = {
        "team": team, "name": name, "kind": variant.kind.name, "flavor": variant.flavor, "image": IMAGE,
        "command": ["python"], "args": ["train.py"],
        # The kwok fake pods end after this (run-to-completion pods only).
        "env": {"GPUPLATFORM_FAKE_DURATION": _duration(seconds), "SOAK": "1"},
        "gpus_per_worker": gpus, "cpu_per_worker": "1", "memory_per_worker_gib": 4,
    }
    if label in LONG_LIVED:  # they run until cancelled: no fake end, the image's own entrypoint
        body.update(command=[], args=[], env={"SOAK": "1"}, priority=priority)
        return {**body, **fields}
    if variant.scheduler == KUEUE:  # priorities are Kueue's: the API refuses one on Volcano
        body["priority"] = priority
    body.update(fields)
    if max_runtime:
        body["max_runtime_seconds"] = max_runtime
    return body


def build(profile: Profile) -> list[Planned]:
    rng = random.Random(profile.seed)
    windows = quiet_windows(profile)
    T = profile.seconds
    plan: list[Planned] = []
    counts = {label: 0 for label in KINDS}

    def add(label, team, at, scene, cancel_after=None, scale=False, **shape):
        counts[label] += 1
        name = f"{NAMES[label]}-{counts[label]:03d}"
        at = _outside(at, windows)
        item = Planned(key=f"soak-{profile.seed}-{label}-{counts[label]}", at=at, team=team, label=label,
                       body=_body(team, label, name, rng, **shape), scene=scene)
        if cancel_after is not None:
            cancel = _outside(at + cancel_after, windows)
            item.cancel_at = cancel if cancel < profile.at(ACTIVE_UNTIL) else None
        if scale:
            item.scale_at = profile.at(SCALE_AT)
        plan.append(item)
        return item

    long_run = 2 * T + 60  # longer than the soak
    # borrow: 3 x 8 GPUs of low priority for vision, whose nominal H100 quota is 12.
    for i in range(3):
        add("kueue-training", "vision", profile.at(0.04) + i, "borrow", seconds=profile.at(0.45),
            priority="low", workers=2, gpus=4)
    # preempt: high priority in vision's own queue, then nlp reclaiming its lent GPUs.
    for i in range(2):
        add("kueue-training", "vision", profile.at(0.10) + i, "preempt", seconds=profile.at(0.2),
            priority="high", workers=1, gpus=4)
    for i in range(2):
        add("kueue-training", "nlp", profile.at(0.13) + i, "preempt", seconds=profile.at(0.2),
            priority="normal", workers=2, gpus=4)
    # Volcano gangs that fill team nlp's A100 queue for a while.
    for i in range(2):
        add("volcano-training", "nlp", profile.at(0.06) + i, "gang", seconds=profile.at(0.25), workers=2, gpus=2)
    # long: through every sweep and every fault.
    for label in ("kueue-training", "volcano-training"):
        for i in range(max(2, profile.jobs_per_kind // 12)):
            add(label, ("vision", "nlp")[i % 2], profile.at(0.02) + i, "long", seconds=long_run,
                workers=1 + i % 2, gpus=1)
    if T >= 180:  # a max runtime of 60 s (the smallest allowed) must end inside the run
        for i in range(2):
            add("kueue-training", ("vision", "nlp")[i], profile.at(0.05) + i, "max-runtime", seconds=long_run,
                max_runtime=60)
    # scale: one inference service per scheduler, scaled by the "HPA" and kept to the end.
    for label in ("kueue-inference", "volcano-inference"):
        add(label, "vision", profile.at(0.03), "scale", scale=True, seconds=1, max_replicas=SCALED_REPLICAS)
    # idle GPUs: one Volcano job of each scene (two-worker gangs for the idle and the
    # one-busy-rank ones), all longer than the soak: only a reclaim ends the idle ones.
    for i, (scene, env) in enumerate(IDLE_SCENES.items()):
        item = add("volcano-training", SCENE_TEAMS.get(scene, "vision"), profile.at(0.01) + i, scene,
                   seconds=long_run, workers=SCENE_WORKERS.get(scene, 1), gpus=1)
        item.body["env"].update(env)
    # Ray jobs and clusters, and notebooks: early, cancelled after a while (their pods never end).
    for label in sorted(LONG_LIVED):
        for i in range(wanted(label, profile)):
            at = profile.at(0.02) + 2 * i + (0 if VARIANTS[label].kind.soak.early else rng.uniform(0, profile.at(0.3)))
            add(label, ("vision", "nlp")[i % 2], at, "random", cancel_after=rng.uniform(20, max(30, profile.at(0.3))),
                seconds=1, workers=1, gpus=1)
    # The rest at random times until SUBMIT_UNTIL.
    for label, variant in VARIANTS.items():
        while counts[label] < wanted(label, profile):
            at = rng.uniform(profile.at(0.02), profile.at(SUBMIT_UNTIL))
            team = rng.choice(("vision", "nlp"))
            if not variant.kind.runs_until_cancelled:  # it ends by itself
                short = rng.random() < 0.6
                seconds = rng.uniform(3, 20) if short else rng.uniform(20, profile.at(0.25))
                priority = rng.choices(("low", "normal", "high"), weights=(2, 7, 1))[0]
                cancel = rng.uniform(2, 60) if rng.random() < 0.12 else None
                add(label, team, at, "random", cancel_after=cancel, seconds=seconds, priority=priority,
                    workers=rng.choice((1, 1, 2)), gpus=rng.choice((1, 1, 2)))
            else:
                # Services run until cancelled; most are, after a while, some live to the end.
                cancel = rng.uniform(20, max(30, profile.at(0.3))) if rng.random() < 0.9 else None
                add(label, team, at, "random", cancel_after=cancel, seconds=1,
                    max_replicas=rng.choice((1, 1, 2)))
    plan.sort(key=lambda p: p.at)
    return plan
