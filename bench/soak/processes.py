"""The real processes of the platform, started and stopped by the soak, and the cluster.

Each platform process (Celery worker, Celery beat, status watcher, API server) runs in a
session of its own, so the soak can kill exactly it and its children (the worker's pool)
by process group, and never anything it did not start. The local cluster is driven
through ``cluster.sh`` with the soak's own state directory and ports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .profile import CACHE, CLUSTER_SH, ROOT, Profile, cluster_env

VENV_BIN = Path(sys.executable).parent


def kubectl_binary() -> str:
    found = sorted((CACHE / "bin").glob("kubectl-*"))
    if not found:
        raise SystemExit("kubectl is not built: run make cluster-up once")
    return str(found[-1])


def cluster_sh(profile: Profile, *args: str, timeout: float = 3600) -> str:
    """Run cluster.sh for the soak's cluster; its progress goes to our stderr."""
    env = {**os.environ, **cluster_env(profile)}
    result = subprocess.run([str(CLUSTER_SH), *args], env=env, stdout=subprocess.PIPE, text=True,
                            timeout=timeout, check=False)
    if result.returncode != 0:
        raise SystemExit(f"cluster.sh {' '.join(args)} failed ({result.returncode})")
    return result.stdout


def cluster_up(profile: Profile) -> dict:
    """Start (or find running) the soak's cluster; returns what `cluster.sh up --json` says
    about it (kubeconfig, prometheus_url, ports)."""
    out = cluster_sh(profile, "up", "--json")
    try:
        return json.loads(out)
    except ValueError:
        raise SystemExit(f"cluster.sh up --json printed no JSON:\n{out}") from None


class Processes:
    """The platform's long-running processes, by name."""

    def __init__(self, profile: Profile, env: dict):
        self.profile = profile
        self.env = {**os.environ, **env}
        self.procs: dict[str, subprocess.Popen] = {}
        self.argv: dict[str, list[str]] = {}
        self.expected_exits: set[str] = set()
        self.unexpected: list[str] = []
        profile.logs.mkdir(parents=True, exist_ok=True)
        # A run reads its own logs (the worker's counts the sweeps): start them empty.
        for name in [*self.commands(), "celerybeat-schedule"]:
            path = self.log_path(name) if name in self.commands() else profile.logs / name
            path.unlink(missing_ok=True)

    def commands(self) -> dict[str, list[str]]:
        python, celery, gunicorn = str(VENV_BIN / "python"), str(VENV_BIN / "celery"), str(VENV_BIN / "gunicorn")
        schedule = str(self.profile.logs / "celerybeat-schedule")
        return {
            # One worker for both queues: the soak measures reconciles, not webhook isolation.
            "worker": [celery, "-A", "gpuplatform", "worker", "--loglevel", "INFO", "-n", "soak@%h",
                       "--queues", "celery,webhooks", "--concurrency", self.env.get("CELERY_WORKER_CONCURRENCY", "2")],
            "beat": [celery, "-A", "gpuplatform", "beat", "--loglevel", "INFO", "--schedule", schedule],
            "watcher": [python, "manage.py", "watch_cluster"],
            "api": [gunicorn, "gpuplatform.wsgi", "--bind", f"127.0.0.1:{self.profile.api_port}",
                    "--workers", self.env.get("WEB_CONCURRENCY", "2"), "--access-logfile", "-",
                    "--timeout", "60"],
        }

    def log_path(self, name: str) -> Path:
        return self.profile.logs / f"{name}.log"

    def start(self, name: str) -> None:
        argv = self.commands()[name]
        log = open(self.log_path(name), "a")  # appended: a restarted worker keeps one log
        log.write(f"\n===== soak: starting {name} at {time.strftime('%H:%M:%S')} =====\n")
        log.flush()
        self.procs[name] = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        self.expected_exits.discard(name)
        log.close()

    def start_all(self) -> None:
        for name in ("api", "worker", "beat", "watcher"):
            self.start(name)
        self.wait_for_api()

    def wait_for_api(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.profile.api_url}/api/v1/ping", timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
            self.check()
        raise SystemExit(f"the API did not answer within {timeout:.0f}s (log: {self.log_path('api')})")

    def kill(self, name: str) -> None:
        """SIGKILL the process and its children (a crashed node, not a shutdown)."""
        proc = self.procs[name]
        self.expected_exits.add(name)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def check(self) -> list[str]:
        """Names of processes that died without being asked to; they are recorded once."""
        died = []
        for name, proc in self.procs.items():
            if proc.poll() is not None and name not in self.expected_exits:
                died.append(name)
                self.unexpected.append(f"{name} exited with {proc.returncode}")
                self.expected_exits.add(name)
        return died

    def stop_all(self, timeout: float = 20) -> None:
        """SIGTERM every group, then SIGKILL what is left after ``timeout`` seconds."""
        for name, proc in self.procs.items():
            self.expected_exits.add(name)
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)


def manage(env: dict, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python manage.py ...`` with the soak's environment; output captured."""
    return subprocess.run([str(VENV_BIN / "python"), "manage.py", *args], cwd=ROOT,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)


def kubectl(kubeconfig: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([kubectl_binary(), "--kubeconfig", kubeconfig, *args], capture_output=True,
                          text=True, timeout=timeout)
