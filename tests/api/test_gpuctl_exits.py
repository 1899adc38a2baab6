"""Every exit code of ``gpuctl`` that docs/api.md documents, one test each, and the table
there holds exactly the codes ``gpuctl.output.EXIT`` has. (SIGTERM and SIGINT as a CI
runner sends them, to gpuctl as a process of its own: tests/api/test_gpuctl_ci.py.)"""

import os
import re
import signal
import time
from pathlib import Path

import pytest

from gpuctl.cli import EXIT, main
from jobs.lifecycle import State
from jobs.models import Job

from ..support.gpuctl import JOB_YAML, move_job_later, when_job_exists

pytestmark = pytest.mark.django_db(transaction=True)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "api.md"
WAIT = ("--wait", "--interval", "0.1", "--timeout", "30")


def documented_codes() -> dict[int, str]:
    text = DOCS.read_text()
    table = text[text.index("| exit code | meaning |"):].split("\n\n", 1)[0]
    return {int(code): meaning for code, meaning in re.findall(r"^\| (\d+) \| (.+) \|$", table, re.MULTILINE)}


def test_the_docs_table_lists_exactly_the_exit_codes_gpuctl_has():
    assert set(documented_codes()) == set(EXIT.values())


def test_exit_0_the_job_succeeded(gpuctl, job_file):
    mover = move_job_later("resnet", [State.RUNNING, State.SUCCEEDED])
    assert gpuctl("submit", "-f", str(job_file), *WAIT)[0] == EXIT["ok"] == 0
    mover.join()


def test_exit_1_the_job_failed(gpuctl, job_file):
    mover = move_job_later("resnet", [State.RUNNING, State.FAILED])
    assert gpuctl("submit", "-f", str(job_file), *WAIT)[0] == EXIT["failed"] == 1
    mover.join()


def test_exit_2_a_bad_command_line(job_file):
    with pytest.raises(SystemExit) as exit_:
        main(["submit", "-f", str(job_file), "--wait", "--interval", "0"])
    assert exit_.value.code == EXIT["usage"] == 2


def test_exit_3_the_job_was_cancelled(gpuctl, job_file, member):
    def cancel(job):
        job.request_cancel(member)
        job.observe(State.CANCELLED, reason="Cancelled", message="removed")

    mover = when_job_exists("resnet", cancel)
    assert gpuctl("submit", "-f", str(job_file), *WAIT)[0] == EXIT["cancelled"] == 3
    mover.join()


def test_exit_4_the_server_rejected_the_job(gpuctl, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(JOB_YAML.replace("gpus_per_worker: 4", "gpus_per_worker: 9"))
    assert gpuctl("submit", "-f", str(bad))[0] == EXIT["invalid"] == 4


def test_exit_5_not_allowed(gpuctl, monkeypatch):
    monkeypatch.setenv("GPUPLATFORM_TOKEN", "gpp_0000000000000000")
    assert gpuctl("whoami")[0] == EXIT["auth"] == 5


def test_exit_6_not_found(gpuctl):
    assert gpuctl("status", "999999")[0] == EXIT["not_found"] == 6


def test_exit_7_the_server_is_unreachable(gpuctl, monkeypatch):
    monkeypatch.setenv("GPUPLATFORM_URL", "http://127.0.0.1:9")
    assert gpuctl("list")[0] == EXIT["unavailable"] == 7


def test_exit_8_the_wait_timed_out(gpuctl, job_file):
    assert gpuctl("submit", "-f", str(job_file), "--wait", "--interval", "0.1", "--timeout", "0.2")[0] == 8


def test_exit_9_the_job_can_never_run(gpuctl, job_file, gpuctl_quota):
    gpuctl_quota.delete()
    assert gpuctl("submit", "-f", str(job_file), *WAIT)[0] == EXIT["never"] == 9


def test_exit_10_the_job_was_reclaimed(gpuctl, job_file):
    gpuctl("submit", "-f", str(job_file))
    job = Job.objects.get()
    Job.objects.filter(pk=job.pk).update(state=State.RECLAIMED)
    assert gpuctl("wait", str(job.pk))[0] == EXIT["reclaimed"] == 10


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_exit_130_and_143_a_signal_stopped_the_wait(gpuctl, job_file, signum, code):
    default = signal.getsignal(signum)

    def send(job):
        deadline = time.monotonic() + 20
        while signal.getsignal(signum) is default and time.monotonic() < deadline:
            time.sleep(0.02)  # gpuctl's handler is in place: the signal reaches it, not pytest
        if signal.getsignal(signum) is not default:
            os.kill(os.getpid(), signum)

    sender = when_job_exists("resnet", send, delay=0)
    result = gpuctl("submit", "-f", str(job_file), *WAIT)
    sender.join()
    assert result[0] == code and Job.objects.get().state == State.CANCELLING
    assert signal.getsignal(signum) is default  # put back as it was

