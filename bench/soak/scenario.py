"""The compressed day itself: submit, cancel and scale as the plan says, break things
on schedule (SIGKILL the worker, restart the API server), keep quiet in the windows where
the no-op sweep is measured, and say every ~15 s how it goes.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter

from . import plan as plan_module
from .api import Api, ApiError
from .observer import Observer
from .plan import APISERVER_RESTART_AT, SCALED_REPLICAS, WORKER_KILL_AT, Planned
from .processes import Processes, cluster_sh, kubectl
from .profile import Profile
from .quiet import LogCounter, measure
from .timeline import accounts

PROGRESS_EVERY = 15
# Submissions sent twice with the same Idempotency-Key, as a CI job retried after a timeout.
RETRY_FRACTION = 0.05


class Run:
    def __init__(self, profile: Profile, plan: list[Planned], tokens: dict, *, observer: Observer,
                 procs: Processes, kubeconfig: str, env: dict, redis):
        self.profile, self.plan, self.observer, self.procs = profile, plan, observer, procs
        self.kubeconfig, self.env, self.redis = kubeconfig, env, redis
        self.apis = {team: Api(profile.api_url, token) for team, token in tokens.items()}
        self.rng = random.Random(profile.seed + 1)
        self.sweeps = LogCounter(procs.log_path("worker"), r"Task gpuplatform\.tasks\.sweep\[[^\]]+\] succeeded")
        self.t0 = time.time()
        self.errors: list[str] = []
        self.retry_mismatches: list[str] = []
        self.faults: dict[str, str] = {}
        self.apiserver_away: tuple[float, float] | None = None  # (down from, ready again), epoch seconds
        self.windows: list[dict] = []
        self.scaled: dict[int, float] = {}
        self.max_queue = 0
        self._pending_windows = list(plan_module.quiet_windows(profile))
        self._window_thread: threading.Thread | None = None
        self._fault_thread: threading.Thread | None = None
        self._worker_back_at: float | None = None
        self._next_progress = PROGRESS_EVERY

    # --- clock ------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.time() - self.t0

    def stamp(self, seconds: float | None = None) -> str:
        seconds = self.elapsed() if seconds is None else seconds
        return f"{int(seconds // 60):02d}:{int(seconds % 60):02d}"

    def say(self, message: str) -> None:
        print(f"[soak {self.stamp()}] {message}", flush=True)

    # --- the loop ---------------------------------------------------------------------------
    def run(self) -> None:
        self.say(f"{len(self.plan)} jobs planned over {self.profile.minutes:g} min; sweep every "
                 f"{self.profile.sweep_seconds}s")
        while True:
            now = self.elapsed()
            self._act(now)
            self._faults(now)
            self._quiet(now)
            self._watch_processes()
            if now >= self._next_progress:
                self.progress()
                self._next_progress += PROGRESS_EVERY
            if now >= self.profile.seconds and not self._pending_windows and not self._busy_thread():
                break
            time.sleep(0.5)
        self.progress()

    def _busy_thread(self) -> bool:
        return any(t is not None and t.is_alive() for t in (self._window_thread, self._fault_thread))

    def _measuring(self) -> bool:
        return self._window_thread is not None and self._window_thread.is_alive()

    def _act(self, now: float) -> None:
        if self._measuring():  # a window that runs long pushes the plan back, never into it
            return
        for item in self.plan:
            if item.job_id is None and item.submitted_at is None and item.at <= now:
                self.submit(item)
            if item.cancel_at is not None and item.cancelled_at is None and item.job_id and item.cancel_at <= now:
                self.cancel(item)
            if item.scale_at is not None and item.job_id and item.job_id not in self.scaled and item.scale_at <= now:
                self.scale(item)

    # --- what CI pipelines and the HPA do --------------------------------------------------
    def submit(self, item: Planned) -> None:
        api = self.apis[item.team]
        item.submitted_at = time.time()
        try:
            status, body = api.submit(item.body, item.key)
            item.job_id = body["id"]
            if self.rng.random() < RETRY_FRACTION:
                again, body2 = api.submit(item.body, item.key)
                if again != 200 or body2.get("id") != item.job_id:
                    self.retry_mismatches.append(f"retry of {item.key} gave {again} #{body2.get('id')}")
        except ApiError as err:
            self.errors.append(f"submit {item.body['name']}: {err}")

    def cancel(self, item: Planned) -> None:
        item.cancelled_at = time.time()
        try:
            status, _ = self.apis[item.team].cancel(item.job_id)
            item.notes.append(f"cancel {status}")
        except ApiError as err:
            if err.status == 409:  # it ended first: nothing to cancel, as for a real pipeline
                item.cancelled_at = None
                item.cancel_at = None
                item.notes.append("cancel 409")
            else:
                self.errors.append(f"cancel #{item.job_id}: {err}")

    def scale(self, item: Planned) -> None:
        """What an HPA does: write spec.replicas through the scale subresource, as another manager."""
        from .observer import DEPLOYMENT

        with self.observer.lock:
            live = [d for d in self.observer.job_objects(DEPLOYMENT).get(item.job_id, []) if not d.gone]
        if not live:
            return  # not on the cluster yet: try again on the next turn
        name, namespace = live[0].name, live[0].namespace
        result = kubectl(self.kubeconfig, "patch", "deployment", name, "-n", namespace, "--subresource=scale",
                         "--type=merge", "-p", json.dumps({"spec": {"replicas": SCALED_REPLICAS}}),
                         "--field-manager=soak-hpa")
        if result.returncode == 0:
            self.scaled[item.job_id] = time.time()
            self.say(f"scaled {namespace}/{name} to {SCALED_REPLICAS} replicas (field manager soak-hpa)")
        elif "NotFound" not in result.stderr:
            self.errors.append(f"scale {name}: {result.stderr.strip()[:200]}")
            item.scale_at = None  # said once; not retried every turn

    # --- faults ------------------------------------------------------------------------------
    def _faults(self, now: float) -> None:
        if self._measuring():
            return
        if "worker" not in self.faults and now >= self.profile.at(WORKER_KILL_AT):
            self.procs.kill("worker")
            self.faults["worker"] = f"SIGKILL at {self.stamp(now)}"
            self._worker_back_at = now + 3
            self.say("SIGKILLed the Celery worker (and its pool); starting it again in 3 s")
        if self._worker_back_at is not None and now >= self._worker_back_at:
            self.procs.start("worker")
            self._worker_back_at = None
            self.faults["worker"] += f", restarted at {self.stamp(now)}"
        if "apiserver" not in self.faults and now >= self.profile.at(APISERVER_RESTART_AT):
            self.faults["apiserver"] = f"restart from {self.stamp(now)}"
            self._fault_thread = threading.Thread(target=self._restart_apiserver, daemon=True)
            self._fault_thread.start()

    def _restart_apiserver(self) -> None:
        self.say("restarting kube-apiserver")
        began = time.time()
        try:
            cluster_sh(self.profile, "restart-apiserver", timeout=300)
            self.apiserver_away = (began, time.time())
            self.faults["apiserver"] += f", ready again after {time.time() - began:.0f}s"
        except SystemExit as err:
            self.errors.append(f"kube-apiserver restart: {err}")
        self.say("kube-apiserver is back")

    def _watch_processes(self) -> None:
        for name in self.procs.check():
            self.errors.append(f"{name} died on its own at {self.stamp()}; started again")
            self.say(f"{name} died on its own; starting it again")
            self.procs.start(name)

    # --- quiet windows -----------------------------------------------------------------------
    def _quiet(self, now: float) -> None:
        if (not self._pending_windows or self._busy_thread() or self._worker_back_at is not None
                or now < self._pending_windows[0][0]):
            return
        start, _ = self._pending_windows.pop(0)
        label = "the end" if not self._pending_windows else f"{self.stamp(start)}"
        self.say(f"quiet window ({label}): nothing submitted; counting writes over the next sweeps")
        self._window_thread = threading.Thread(target=self._measure, args=(label,), daemon=True)
        self._window_thread.start()

    def _measure(self, label: str) -> None:
        window = measure(label, kubeconfig=self.kubeconfig, env=self.env, observer=self.observer,
                         sweeps=self.sweeps, queue_depth=self.queue_depth, busy=self.busy,
                         sweep_seconds=self.profile.sweep_seconds)
        self.windows.append(window)
        self.say(f"quiet window ({label}): {window['sweeps']} sweeps, {window['apply']} APPLY requests, "
                 f"{window['seen']} platform writes seen; "
                 f"reconcile --all twice: {window['reconcile'][0]} then {window['reconcile'][1]} writes")

    # --- reading the platform ----------------------------------------------------------------
    def queue_depth(self) -> int:
        try:
            depth = int(self.redis.llen("celery"))
        except Exception:  # noqa: BLE001 - a progress number, not worth stopping for
            return 0
        self.max_queue = max(self.max_queue, depth)
        return depth

    def job_ids(self) -> list[int]:
        return [p.job_id for p in self.plan if p.job_id is not None]

    def busy(self) -> bool:
        from jobs.models import Job

        return Job.objects.filter(pk__in=self.job_ids(), state__in=["submitted", "cancelling"]).exists()

    def cancels(self) -> dict[int, float]:
        return {p.job_id: p.cancelled_at for p in self.plan if p.job_id and p.cancelled_at}

    def labels(self) -> dict[int, str]:
        return {p.job_id: p.label for p in self.plan if p.job_id is not None}

    def progress(self) -> None:
        from jobs.models import Job

        from .checks import load_jobs

        states = Counter(Job.objects.filter(pk__in=self.job_ids()).values_list("state", flat=True))
        jobs = load_jobs(self.job_ids(), self.cancels())
        with self.observer.lock:
            restarts = sum(a.restarts for a in accounts(self.observer, jobs, self.labels()).values())
            writes = sum(len(i.platform_writes) for i in self.observer.objects.values() if i.kind[1] != "Workload")
        shown = ", ".join(f"{state} {n}" for state, n in sorted(states.items())) or "none yet"
        self.say(f"jobs: {shown} | sweeps {self.sweeps()} | restarts {restarts} | platform re-writes "
                 f"{writes} | queue {self.queue_depth()}")
