"""``gpuctl`` end to end against a running server (pytest-django's live server).

``--wait`` needs a job to move: with no cluster here, a thread plays the status watcher
and moves the job through its states in the database (``job.observe``, as the watcher
does) while gpuctl polls.
"""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from gpuctl.cli import EXIT, main
from jobs.lifecycle import State
from jobs.models import Job

from ..builders import make_quota
from ..support.api import add_pod, issue_token
from ..support.gpuctl import JOB_YAML, in_own_connection, move_job_later

pytestmark = pytest.mark.django_db(transaction=True)

@pytest.fixture
def quota(gpuctl_quota):
    return gpuctl_quota


def test_submit_creates_the_job_from_the_yaml_file(gpuctl, job_file):
    code, out, _ = gpuctl("submit", "-f", str(job_file))
    assert code == EXIT["ok"]
    job = Job.objects.get()
    assert out == f"job {job.pk} vision/resnet submitted: submitted\npage: {settings.PUBLIC_URL}/jobs/{job.pk}/\n"
    assert (job.command, job.args, job.env, job.workers) == (["torchrun", "train.py"], ["--epochs", "3"],
                                                              {"EPOCHS": "3", "DEBUG": "true"}, 2)


def test_submit_with_the_same_idempotency_key_does_not_submit_twice(gpuctl, job_file):
    assert gpuctl("submit", "-f", str(job_file), "--idempotency-key", "ci-7")[0] == EXIT["ok"]
    code, out, _ = gpuctl("submit", "-f", str(job_file), "--idempotency-key", "ci-7")
    assert code == EXIT["ok"] and "already submitted" in out
    assert Job.objects.count() == 1


def test_submit_wait_streams_state_changes_and_exits_0_when_the_job_succeeds(gpuctl, job_file):
    mover = move_job_later("resnet", [State.RUNNING, State.SUCCEEDED])
    code, out, _ = gpuctl("submit", "-f", str(job_file), "--wait", "--interval", "0.1", "--timeout", "30")
    mover.join()
    assert code == EXIT["ok"]
    lines = out.splitlines()
    transitions = [line.split()[1:4] for line in lines[2:-2]]
    assert transitions == [["draft", "->", "submitted"], ["submitted", "->", "admitted"],
                           ["admitted", "->", "running"], ["running", "->", "succeeded"]]
    assert lines[-2].endswith("succeeded: now succeeded")
    assert lines[-1] == f"page: {settings.PUBLIC_URL}/jobs/{Job.objects.get().pk}/"


@pytest.mark.parametrize("end, exit_code", [(State.FAILED, EXIT["failed"]), ("cancel", EXIT["cancelled"])])
def test_submit_wait_exits_non_zero_when_the_job_fails_or_is_cancelled(gpuctl, job_file, end, exit_code, member):
    if end == "cancel":
        def cancel():
            deadline = time.monotonic() + 20
            while not Job.objects.filter(name="resnet").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)
            job = Job.objects.get(name="resnet")
            job.request_cancel(member)
            job.observe(State.CANCELLED, reason="Cancelled", message="removed")

        mover = threading.Thread(target=in_own_connection(cancel))
        mover.start()
    else:
        mover = move_job_later("resnet", [State.RUNNING, State.FAILED])
    code, out, _ = gpuctl("submit", "-f", str(job_file), "--wait", "--interval", "0.1", "--timeout", "30")
    mover.join()
    assert code == exit_code
    assert out.splitlines()[-2].split()[2].rstrip(":") == ("failed" if end == State.FAILED else "cancelled")


def test_submit_wait_gives_up_after_its_timeout(gpuctl, job_file):
    code, _, err = gpuctl("submit", "-f", str(job_file), "--wait", "--interval", "0.1", "--timeout", "0.3")
    assert code == EXIT["timeout"] and "gave up waiting" in err


def test_validation_errors_are_printed_per_field(gpuctl, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(JOB_YAML.replace("gpus_per_worker: 4", "gpus_per_worker: 9"))
    code, _, err = gpuctl("submit", "-f", str(bad))
    assert code == EXIT["invalid"]
    assert err == ("gpuctl: rejected (400 invalid): Some fields are invalid.\n"
                   "  gpus_per_worker: 9 GPUs per worker, but nodes of flavor h100 have 8.\n")
    assert not Job.objects.exists()


def test_job_file_mistakes_are_caught_before_sending(gpuctl, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(JOB_YAML + "gpus: 4\n")
    code, _, err = gpuctl("submit", "-f", str(bad))
    assert code == EXIT["invalid"] and "unknown field(s) gpus" in err


def test_a_bad_token_is_an_auth_error_that_says_what_to_check(gpuctl, monkeypatch, job_file):
    monkeypatch.setenv("GPUPLATFORM_TOKEN", "gpp_0000000000000000")
    code, _, err = gpuctl("list")
    assert code == EXIT["auth"]
    assert err == "gpuctl: not allowed (401 authentication_failed): Unknown API token. Check GPUPLATFORM_TOKEN.\n"


def test_a_token_without_the_submit_scope_cannot_submit(gpuctl, monkeypatch, job_file, member, team):
    monkeypatch.setenv("GPUPLATFORM_TOKEN", issue_token(member, team=team, scopes=["read"]))
    code, _, err = gpuctl("submit", "-f", str(job_file))
    assert code == EXIT["auth"] and "'submit' scope" in err


def test_missing_configuration_is_explained(monkeypatch, capsys):
    monkeypatch.delenv("GPUPLATFORM_URL", raising=False)
    assert main(["list"]) == EXIT["usage"]
    assert "GPUPLATFORM_URL is not set" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["gpu.example.org", "ftp://gpu.example.org", "https://"])
def test_a_url_that_is_not_http_is_a_usage_error_at_once(monkeypatch, capsys, url):
    monkeypatch.setenv("GPUPLATFORM_URL", url)
    monkeypatch.setenv("GPUPLATFORM_TOKEN", "gp_x")
    assert main(["list"]) == EXIT["usage"]
    assert "is not an http(s) URL" in capsys.readouterr().err


@pytest.mark.parametrize(("option", "value"), [("--interval", "-1"), ("--interval", "0"), ("--interval", "soon"),
                                               ("--interval", "nan"), ("--timeout", "-1"), ("--timeout", "inf")])
def test_wait_times_out_of_range_are_usage_errors_that_say_so(job_file, option, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["submit", "-f", str(job_file), "--wait", option, value])
    assert exit_.value.code == EXIT["usage"]
    assert option in capsys.readouterr().err


def test_an_unreachable_server_is_reported(monkeypatch, capsys):
    monkeypatch.setenv("GPUPLATFORM_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GPUPLATFORM_TOKEN", "gpp_x")
    monkeypatch.setenv("GPUPLATFORM_RETRY_BACKOFF", "0")
    assert main(["list"]) == EXIT["unavailable"]
    assert "Cannot reach http://127.0.0.1:9/api/v1" in capsys.readouterr().err


def test_status_list_cancel_and_logs(gpuctl, job_file, monkeypatch):
    from cluster import FakeCluster
    from core import reconcile

    gpuctl("submit", "-f", str(job_file))
    job = Job.objects.get()
    code, out, _ = gpuctl("status", str(job.pk))
    assert code == 0 and f"job {job.pk}  vision/resnet  (training, h100, 8 GPUs)" in out and "state: submitted" in out
    code, out, _ = gpuctl("list")
    assert code == 0 and out.splitlines()[0].split() == ["ID", "TEAM", "NAME", "STATE", "FLAVOR", "GPUS", "SUBMITTED",
                                                         "PAGE"]
    assert out.splitlines()[1].split()[-1] == f"{settings.PUBLIC_URL}/jobs/{job.pk}/"
    assert out.splitlines()[1].split()[:6] == [str(job.pk), "vision", "resnet", "submitted", "h100", "8"]
    code, out, _ = gpuctl("list", "--state", "running")
    assert len(out.splitlines()) == 1  # only the header

    code, _, err = gpuctl("logs", str(job.pk))
    assert code == EXIT["unavailable"] and "no cluster configured" in err

    cluster = FakeCluster()
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: cluster)
    add_pod(cluster, job, "resnet-1-0", "loss 0.5\n")
    code, out, _ = gpuctl("logs", str(job.pk))
    assert (code, out) == (0, "loss 0.5\n")

    code, out, _ = gpuctl("cancel", str(job.pk))
    assert (code, out) == (0, f"job {job.pk} cancelling  {settings.PUBLIC_URL}/jobs/{job.pk}/\n")
    code, _, err = gpuctl("cancel", str(job.pk))
    assert code == EXIT["invalid"] and "already cancelling" in err
    assert gpuctl("status", "999999")[0] == EXIT["not_found"]


def test_the_installed_console_script_works(live_server, member, team, flavor, job_file):
    script = Path(sys.executable).with_name("gpuctl")
    env = {"GPUPLATFORM_URL": live_server.url, "GPUPLATFORM_TOKEN": issue_token(member), "PATH": "/usr/bin:/bin"}
    submitted = subprocess.run([str(script), "submit", "-f", str(job_file)], env=env, capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    listed = subprocess.run([str(script), "-o", "json", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and '"name": "resnet"' in listed.stdout


def test_json_output_with_wait_is_one_json_document_and_progress_goes_to_stderr(gpuctl, job_file):
    mover = move_job_later("resnet", [State.RUNNING, State.SUCCEEDED])
    code, out, err = gpuctl("-o", "json", "submit", "-f", str(job_file), "--wait", "--interval", "0.1",
                            "--timeout", "30")
    mover.join()
    assert code == EXIT["ok"]
    assert json.loads(out)["state"] == "succeeded"
    assert "submitted: submitted" in err and "running -> succeeded" in err


def test_wait_on_a_job_that_can_never_run_exits_at_once_with_the_reason(gpuctl, job_file, quota):
    quota.delete()  # the team has no quota on h100: "Can never run"
    started = time.monotonic()
    code, out, err = gpuctl("submit", "-f", str(job_file), "--wait", "--interval", "0.1", "--timeout", "30")
    assert code == EXIT["never"]
    assert time.monotonic() - started < 10
    job = Job.objects.get()
    assert f"job {job.pk} can never run as asked" in err and "no quota on h100" in err
    assert job.state == State.SUBMITTED  # accepted all the same: the quota may grow


def test_without_wait_a_job_that_can_never_run_is_submitted_with_a_warning(gpuctl, job_file, quota):
    quota.delete()
    code, _, err = gpuctl("submit", "-f", str(job_file))
    assert code == EXIT["ok"] and "warning:" in err and "no quota on h100" in err


@pytest.mark.parametrize("argv", [["-o", "json", "list"], ["list", "-o", "json"], ["list", "--output=json"]])
def test_the_output_option_goes_before_or_after_the_command(gpuctl, job_file, argv):
    gpuctl("submit", "-f", str(job_file))
    code, out, _ = gpuctl(*argv)
    assert code == EXIT["ok"] and [job["name"] for job in json.loads(out)] == ["resnet"]


def test_yaml_output_is_one_yaml_document(gpuctl, job_file):
    gpuctl("submit", "-f", str(job_file))
    job = Job.objects.get()
    code, out, _ = gpuctl("status", str(job.pk), "-o", "yaml")
    document = yaml.safe_load(out)
    assert code == EXIT["ok"] and document["name"] == "resnet" and document["events"][0]["to_state"] == "submitted"
    assert "&id" not in out


@pytest.mark.parametrize("limit", ["0", "-1", "many"])
def test_a_limit_below_one_is_a_usage_error_that_says_so(gpuctl, limit, capsys):
    with pytest.raises(SystemExit) as exit_:
        gpuctl("list", "--limit", limit)
    assert exit_.value.code == EXIT["usage"]
    assert "--limit" in capsys.readouterr().err


def test_a_job_over_the_persons_cap_says_so_on_submit_status_and_list(gpuctl, job_file, member, team, flavor):
    from gpuctl.cli import AT_CAP
    from jobs.lifecycle import AT_PERSONAL_CAP
    from quotas.models import MemberCap

    assert AT_CAP == AT_PERSONAL_CAP
    MemberCap.objects.create(team=team, flavor=flavor, user=member, max_gpus=8)
    assert gpuctl("submit", "-f", str(job_file))[0] == 0
    job_file.write_text(JOB_YAML.replace("name: resnet", "name: second"))
    code, _, err = gpuctl("submit", "-f", str(job_file))
    assert code == 0
    assert "gpuctl: waiting at your cap: You hold 8 of your 8 h100 GPUs in team vision; this job needs 8." in err
    second = Job.objects.get(name="second")
    code, out, _ = gpuctl("status", str(second.pk))
    assert "state: submitted  AtPersonalCap: You hold 8 of your 8 h100 GPUs" in out
    code, out, _ = gpuctl("list")
    assert out.splitlines()[1].split()[:5] == [str(second.pk), "vision", "second", "submitted", "(at"]


def test_a_job_kept_back_behind_a_reservation_says_so_on_submit_and_list(gpuctl, job_file, team, flavor):
    from datetime import timedelta

    from django.utils import timezone

    from gpuctl.cli import BEHIND
    from jobs.lifecycle import BEHIND_RESERVATION

    assert BEHIND == BEHIND_RESERVATION
    flavor.backfill = True
    flavor.save()
    held_since = timezone.now() - timedelta(hours=1)
    blocker = Job.objects.create(team=team, flavor=flavor, name="blocker", image="x:1", workers=1, gpus_per_worker=4,
                                 max_runtime_seconds=7200, state=State.RUNNING, admitted_at=held_since,
                                 run_admitted_at=held_since, gpus_in_use=4)
    Job.objects.create(team=team, flavor=flavor, name="head", image="x:1", workers=2, gpus_per_worker=4,
                       max_runtime_seconds=3600, state=State.QUEUED)
    assert blocker.gpus_in_use == 4
    job_file.write_text(JOB_YAML.replace("workers: 2", "workers: 1").replace("name: resnet", "name: later")
                        + "max_runtime_seconds: 36000\n")
    code, _, err = gpuctl("submit", "-f", str(job_file))
    assert code == 0
    assert "gpuctl: kept back behind a reservation: 8 GPUs are reserved for job head" in err
    assert "With a maximum runtime of 59 min or less it would start now." in err
    code, out, _ = gpuctl("list")
    later = Job.objects.get(name="later")
    row = next(line for line in out.splitlines() if line.split()[:1] == [str(later.pk)])
    assert row.split()[3:5] == ["submitted", "(kept"]


def test_submit_wait_is_done_once_a_ray_cluster_is_up(gpuctl, tmp_path):
    """A Ray cluster runs until cancelled: like a server, --wait ends once it runs."""
    path = tmp_path / "ray.yaml"
    path.write_text("team: vision\nname: ray-dev\nkind: ray-cluster\nflavor: h100\nimage: rayproject/ray:2.52.0\n"
                    "workers: 2\ngpus_per_worker: 2\n")
    mover = move_job_later("ray-dev", [State.RUNNING])
    code, out, _ = gpuctl("submit", "-f", str(path), "--wait", "--interval", "0.1", "--timeout", "30")
    mover.join()
    assert code == EXIT["ok"] and out.splitlines()[-2].endswith("is up (its dashboard: see the job page)")
    assert Job.objects.get().kind == "ray-cluster"


def test_a_queued_job_is_told_when_it_starts_on_submit_and_status(gpuctl, job_file, team, flavor):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.lifecycle import State

    holder = Job.objects.create(team=team, flavor=flavor, name="holder", image="ghcr.io/x/a:1", workers=1,
                                gpus_per_worker=8, max_runtime_seconds=3600, state=State.RUNNING, gpus_in_use=8,
                                admitted_at=timezone.now() - timedelta(minutes=30),
                                run_admitted_at=timezone.now() - timedelta(minutes=30))
    code, out, _ = gpuctl("submit", "-f", str(job_file))
    assert code == 0 and ("Starts in about 30 min" in out or "Starts in about 29 min" in out)
    queued = Job.objects.get(name="resnet")
    code, out, _ = gpuctl("status", str(queued.pk))
    assert "start: Starts in about" in out
    # Half the GPUs would not start sooner either: the holder has all 8; no other flavor.
    assert "sooner:" not in out
    holder.delete()


def test_a_job_that_fits_the_quota_but_not_the_nodes_names_the_job_it_waits_for(gpuctl, job_file, fake, flavor):
    """The same answer in gpuctl and the API's 201 body: 16 GPUs on two nodes, 10 held by another
    team's job, so no node has room for a 4-GPU worker of the job file, whatever the quota says."""
    from ..builders import make_job, make_team
    from ..jobs.test_fragmentation import node, pod

    other = make_team("other")
    make_quota(other, flavor, nominal_gpus=10)
    holder = make_job(other, flavor, workers=2, gpus_per_worker=5)
    for state in (State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING):
        holder.transition(state, reason=state.label)
    for name in ("n0", "n1"):
        fake.put(node(name))
        fake.put(pod(f"holder-{name}", name, 5, holder))
    code, out, err = gpuctl("-o", "json", "submit", "-f", str(job_file))
    assert code == EXIT["ok"]
    verdict = json.loads(out)["feasibility"]
    assert verdict["verdict"] == "queue" and verdict["waits_for"] == [holder.pk] and verdict["room_by"] is None
    assert "6 h100 GPUs free, but at most 3 on one node" in err
    assert f"cannot start until job {holder.pk} (other/{holder.name}, end unknown) ends" in err


def test_status_shows_kueues_own_words_before_the_platforms(gpuctl, job_file):
    from jobs.lifecycle import State

    gpuctl("submit", "-f", str(job_file))
    job = Job.objects.get()
    said = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, "
            "4 more needed")
    job.transition(State.QUEUED, reason="WaitingForQuota", message="Waiting for quota: team vision has too few free "
                   "h100 GPUs for this job (8 needed, 4 more must free up).")
    job.hear_kueue("WaitingForQuota", said)
    code, out, _ = gpuctl("status", str(job.pk))
    lines = out.splitlines()
    kueue = lines.index(f"  Kueue says: WaitingForQuota: {said}")
    ours = next(i for i, line in enumerate(lines) if line.startswith("  GPU Platform: WaitingForQuota: Waiting for"))
    assert code == 0 and lines[kueue - 1] == "state: queued" and kueue < ours
    assert "  GPU Platform counts 0 job(s) ahead that can start" in lines
