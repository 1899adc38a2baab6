"""``gpuctl`` as a CI pipeline uses it: a wait that rides out an outage of the platform and
exits with the job's real outcome, a replayed submit that still exits 9 for a job that can
never run, SIGTERM and SIGINT that cancel the job on the server, ``wait ID`` and
``--cancel-on-timeout``.

The outage is a TCP proxy in front of the live server that the test takes down (connections
refused, then 502 answers) for a few seconds, with a short backoff; the signals are sent to
gpuctl run as a subprocess, as a CI runner would.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from gpuctl import client as gpuctl_client
from gpuctl.cli import EXIT
from jobs.lifecycle import State
from jobs.models import Job

from ..support.api import issue_token
from ..support.gpuctl import job_page, move_job_later, when_job_exists

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: 11\r\n\r\nBad Gateway"


class Proxy:
    """A TCP proxy to the live server: ``up``, ``refusing`` (nothing listens: connections are
    refused) or ``bad_gateway`` (each request answered 502, as a load balancer does while the
    platform restarts)."""

    def __init__(self, target_port: int):
        self.target, self.mode, self.listener = target_port, "up", None
        self.served = Counter()  # requests answered per mode: what the test waits on, not the clock
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.closed = False
        self._listen()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set(self, mode: str) -> None:
        if mode == "refusing" and self.listener is not None:
            self.listener.close()
            self.listener = None
        if mode != "refusing" and self.listener is None:
            self._listen()
        self.mode = mode

    def close(self) -> None:
        self.closed = True
        self.set("refusing")

    def _listen(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        listener.settimeout(0.05)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener) -> None:
        while self.listener is listener:
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def served_since(self, mode: str, before: int, at_least: int = 1, timeout: float = 60) -> None:
        """Wait until `at_least` more requests than `before` were answered in `mode`."""
        deadline = time.monotonic() + timeout
        while self.served[mode] < before + at_least:
            assert time.monotonic() < deadline, f"gpuctl sent no request while the proxy was {mode}"
            time.sleep(0.05)

    def _serve(self, conn) -> None:
        mode = self.mode
        self.served[mode] += 1
        with conn:
            if mode == "bad_gateway":
                conn.recv(65536)
                conn.sendall(BAD_GATEWAY)
                return
            with socket.create_connection(("127.0.0.1", self.target)) as upstream:
                pipe = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
                pipe.start()
                _pump(conn, upstream)
                pipe.join(timeout=30)


def _pump(source, sink) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


@pytest.fixture
def proxy(live_server, monkeypatch):
    proxy = Proxy(int(live_server.url.rsplit(":", 1)[1]))
    monkeypatch.setenv("GPUPLATFORM_URL", proxy.url)
    yield proxy
    proxy.close()


def test_a_wait_rides_out_two_outages_and_exits_with_the_jobs_real_outcome(gpuctl, job_file, proxy, monkeypatch):
    """Connections refused for 2 s, up until gpuctl gets through, then 502s for a while; the job
    succeeds meanwhile."""
    monkeypatch.setenv("GPUPLATFORM_RETRY_BACKOFF", "0.1")

    def outages(job):
        proxy.set("refusing")
        time.sleep(2)
        job.observe(State.RUNNING, reason="Running", message="now running")
        # Up until gpuctl got through (the job, then its events), however slow the machine: two
        # outages, never one long one.
        before = proxy.served["up"]
        proxy.set("up")
        proxy.served_since("up", before, at_least=2)
        before = proxy.served["bad_gateway"]
        proxy.set("bad_gateway")
        job.observe(State.SUCCEEDED, reason="Succeeded", message="now succeeded")
        proxy.served_since("bad_gateway", before)
        time.sleep(1)
        proxy.set("up")

    outage = when_job_exists("resnet", outages, delay=0.5)
    started = time.monotonic()
    code, out, err = gpuctl("submit", "-f", str(job_file), "--wait", "--interval", "0.2", "--outage-window", "30")
    outage.join()
    assert code == EXIT["ok"], err
    assert time.monotonic() - started >= 3  # it did wait through both outages
    assert err.count("platform unreachable") == 2 and err.count("retrying for up to 30s") == 2
    assert "(HTTP 502)" in err and err.count("platform reachable again after") == 2
    lines = out.splitlines()
    assert lines[-2] == "job {} succeeded: now succeeded".format(Job.objects.get().pk)
    assert [line.split()[3] for line in lines if "->" in line][-1] == "succeeded"


def test_an_outage_longer_than_the_window_exits_7_and_says_how_to_follow_on(gpuctl, job_file, proxy, monkeypatch):
    monkeypatch.setenv("GPUPLATFORM_RETRY_BACKOFF", "0.1")
    outage = when_job_exists("resnet", lambda job: proxy.set("refusing"), delay=0.2)
    code, _, err = gpuctl("submit", "-f", str(job_file), "--wait", "--interval", "0.5", "--outage-window", "1.5")
    outage.join()
    job = Job.objects.get()
    assert code == EXIT["unavailable"]
    assert "platform unreachable" in err and "retrying for up to 1.5s" in err
    assert f"for longer than 1.5s; job {job.pk} goes on: follow it with 'gpuctl wait {job.pk}'" in err


def test_the_outage_window_comes_from_the_environment_and_a_bad_value_is_a_usage_error(gpuctl, job_file, monkeypatch):
    monkeypatch.setenv("GPUPLATFORM_OUTAGE_WINDOW", "soon")
    code, _, err = gpuctl("submit", "-f", str(job_file), "--wait")
    assert code == EXIT["usage"] and "GPUPLATFORM_OUTAGE_WINDOW" in err and not Job.objects.exists()


def test_the_backoff_grows_is_capped_has_jitter_and_stops_at_the_window(monkeypatch):
    """No server and no real time: a clock that moves only when the client sleeps."""
    now, pauses = [0.0], []

    def sleep(seconds):
        pauses.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(gpuctl_client.time, "sleep", sleep)
    monkeypatch.setattr(gpuctl_client.time, "monotonic", lambda: now[0])
    told = []
    client = gpuctl_client.Client("http://127.0.0.1:9", "gpp_x", backoff=1, outage_window=200, on_outage=told.append)
    with pytest.raises(gpuctl_client.Unreachable):
        client.get("jobs/1")
    steps = [min(gpuctl_client.MAX_BACKOFF, 2 ** i) for i in range(len(pauses))]
    assert all(step / 2 <= pause <= step for pause, step in zip(pauses[:-1], steps, strict=False))
    assert max(pauses) <= gpuctl_client.MAX_BACKOFF and len(set(pauses)) > 3  # jitter: not all the same
    assert sum(pauses) == pytest.approx(200, abs=1e-6)  # the last pause ends at the window, not past it
    assert len(told) == 1 and told[0].startswith("platform unreachable (") and "Connection refused" in told[0]
    assert told[0].endswith("), retrying for up to 200s")  # said once for the outage, not each try


def test_a_replayed_submit_of_a_job_that_can_never_run_exits_9_at_once(gpuctl, job_file, gpuctl_quota):
    gpuctl_quota.delete()
    args = ("submit", "-f", str(job_file), "--wait", "--interval", "0.1", "--idempotency-key", "ci-1234")
    assert gpuctl(*args)[0] == EXIT["never"]
    started = time.monotonic()
    code, out, err = gpuctl(*args)
    assert code == EXIT["never"] and time.monotonic() - started < 10
    assert "already submitted (same Idempotency-Key)" in out and "can never run as asked" in err
    assert Job.objects.count() == 1


def run_gpuctl(live_server, member, team, *args) -> subprocess.Popen:
    """gpuctl as a CI step runs it: a process of its own, output through pipes."""
    env = {"GPUPLATFORM_URL": live_server.url, "GPUPLATFORM_TOKEN": issue_token(member, team=team),
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "gpuctl", *args], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def signal_once_waiting(process, signum) -> tuple[str, str]:
    """Send ``signum`` once gpuctl has said the job is submitted (it then waits)."""
    first = process.stdout.readline()
    assert "submitted" in first, first + process.stderr.read()
    time.sleep(0.5)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    return first + out, err


def test_sigterm_during_a_wait_cancels_the_job_on_the_server_and_exits_143(live_server, member, team, job_file,
                                                                           gpuctl_quota):
    process = run_gpuctl(live_server, member, team, "submit", "-f", str(job_file), "--wait", "--interval", "0.2")
    _, err = signal_once_waiting(process, signal.SIGTERM)
    job = Job.objects.get()
    assert process.returncode == EXIT["terminated"] == 143
    assert job.state == State.CANCELLING  # on the server: the platform removes its objects
    assert f"gpuctl: SIGTERM: cancelled job {job.pk} (now cancelling): {job_page(job)}" in err


def test_sigint_with_no_cancel_on_interrupt_leaves_the_job_and_exits_130(live_server, member, team, job_file,
                                                                        gpuctl_quota):
    process = run_gpuctl(live_server, member, team, "submit", "-f", str(job_file), "--wait", "--interval", "0.2",
                         "--no-cancel-on-interrupt")
    _, err = signal_once_waiting(process, signal.SIGINT)
    job = Job.objects.get()
    assert process.returncode == EXIT["interrupted"] == 130
    assert job.state == State.SUBMITTED
    assert f"gpuctl: SIGINT: job {job.pk} left as it is ({job_page(job)})" in err


def test_wait_follows_a_submitted_job_to_its_end(gpuctl, job_file):
    gpuctl("submit", "-f", str(job_file))
    job = Job.objects.get()
    mover = move_job_later("resnet", [State.RUNNING, State.FAILED])
    code, out, _ = gpuctl("wait", str(job.pk), "--interval", "0.1", "--timeout", "30")
    mover.join()
    assert code == EXIT["failed"]
    assert out.splitlines()[:2] == [f"job {job.pk} vision/resnet: submitted", f"page: {job_page(job)}"]
    assert out.splitlines()[-2] == f"job {job.pk} failed: now failed"


def test_wait_on_a_job_of_another_team_is_not_found(gpuctl, flavor):
    from ..builders import make_job, make_team

    other = make_job(make_team("other"), flavor)
    assert gpuctl("wait", str(other.pk))[0] == EXIT["not_found"]


def test_cancel_on_timeout_cancels_the_job_when_the_wait_gives_up(gpuctl, job_file):
    code, _, err = gpuctl("submit", "-f", str(job_file), "--wait", "--interval", "0.1", "--timeout", "0.3",
                          "--cancel-on-timeout")
    job = Job.objects.get()
    assert code == EXIT["timeout"] and job.state == State.CANCELLING
    assert f"gave up waiting after 0.3s; job {job.pk} is submitted: cancelled job {job.pk} (now cancelling)" in err


def test_without_cancel_on_timeout_the_job_goes_on(gpuctl, job_file):
    code, _, err = gpuctl("submit", "-f", str(job_file), "--wait", "--interval", "0.1", "--timeout", "0.3")
    job = Job.objects.get()
    assert code == EXIT["timeout"] and job.state == State.SUBMITTED and job_page(job) in err
