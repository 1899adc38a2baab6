"""``gpuctl logs -f``, ``submit --dry-run``, ``whoami`` and ``flavors`` against the live
server; errors as JSON with ``-o json``; help for every argument."""

import argparse
import json
import time

import pytest
import yaml

from gpuctl.cli import EXIT, _parser, main
from gpuctl.waiting import new_lines
from jobs.lifecycle import State
from jobs.models import Job

from ..support.api import add_pod
from ..support.gpuctl import JOB_YAML, when_job_exists

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cluster(monkeypatch):
    from cluster import FakeCluster
    from core import reconcile

    fake = FakeCluster()
    monkeypatch.setattr(reconcile, "cluster_configured", lambda: True)
    monkeypatch.setattr(reconcile, "get_cluster", lambda: fake)
    return fake


def test_logs_follow_prints_each_new_line_once_and_stops_when_the_job_ends(gpuctl, job_file, cluster):
    gpuctl("submit", "-f", str(job_file))
    job = Job.objects.get()
    add_pod(cluster, job, "resnet-0", "epoch 1\n")

    def more(job):
        cluster.set_pod_logs(job.team.namespace_name, "resnet-0", "epoch 1\nepoch 2\n")
        time.sleep(0.5)
        cluster.set_pod_logs(job.team.namespace_name, "resnet-0", "epoch 1\nepoch 2\nepoch 3\ndone\n")
        job.observe(State.SUCCEEDED, reason="Succeeded", message="")

    writer = when_job_exists("resnet", more, delay=0.5)
    code, out, _ = gpuctl("logs", str(job.pk), "-f", "--interval", "0.1")
    writer.join()
    assert (code, out) == (EXIT["ok"], "epoch 1\nepoch 2\nepoch 3\ndone\n")


def test_logs_follow_exits_with_the_jobs_outcome_and_prefixes_lines_of_several_pods(gpuctl, job_file, cluster):
    gpuctl("submit", "-f", str(job_file))
    job = Job.objects.get()
    add_pod(cluster, job, "resnet-0", "a\n")
    add_pod(cluster, job, "resnet-1", "b\n")
    job.observe(State.FAILED, reason="Failed", message="")
    code, out, _ = gpuctl("logs", str(job.pk), "-f", "--interval", "0.1")
    assert (code, out) == (EXIT["failed"], "[resnet-0] a\n[resnet-1] b\n")


def test_logs_follow_without_a_cluster_exits_7_at_once(gpuctl, job_file):
    gpuctl("submit", "-f", str(job_file))
    started = time.monotonic()
    code, _, err = gpuctl("logs", str(Job.objects.get().pk), "-f", "--outage-window", "60")
    assert code == EXIT["unavailable"] and "no cluster configured" in err and time.monotonic() - started < 10
    assert "platform unreachable" not in err  # the platform answered: no outage to ride out


@pytest.mark.parametrize(("before", "now", "fresh"), [
    ([], ["a", "b"], ["a", "b"]),
    (["a", "b"], ["a", "b", "c"], ["c"]),
    (["a", "b", "c"], ["b", "c", "d", "e"], ["d", "e"]),  # the tail window moved on
    (["a", "b"], ["a", "b"], []),
    (["x", "y"], ["a"], ["a"]),  # the container started over
])
def test_new_lines_are_those_after_the_overlap_with_the_last_read(before, now, fresh):
    assert new_lines(before, now) == fresh


def test_dry_run_prints_the_objects_as_yaml_and_creates_nothing(gpuctl, job_file):
    code, out, err = gpuctl("submit", "-f", str(job_file), "--dry-run")
    assert code == EXIT["ok"], err
    objects = list(yaml.safe_load_all(out))
    assert objects and all({"apiVersion", "kind", "metadata"} <= set(obj) for obj in objects)
    assert "dry run: vision/resnet would be accepted; nothing was created." in err and "now:" in err
    assert not Job.objects.exists()


def test_dry_run_with_json_is_the_servers_answer(gpuctl, job_file):
    code, out, _ = gpuctl("-o", "json", "submit", "-f", str(job_file), "--dry-run")
    plan = json.loads(out)
    assert code == EXIT["ok"] and plan["job"]["name"] == "resnet" and plan["feasibility"]["verdict"] == "now"


def test_dry_run_of_a_bad_job_is_rejected_per_field(gpuctl, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(JOB_YAML.replace("gpus_per_worker: 4", "gpus_per_worker: 9"))
    code, _, err = gpuctl("submit", "-f", str(bad), "--dry-run")
    assert code == EXIT["invalid"] and "gpus_per_worker: 9 GPUs per worker" in err and not Job.objects.exists()


def test_dry_run_with_wait_is_a_usage_error(gpuctl, job_file):
    with pytest.raises(SystemExit) as exit_:
        gpuctl("submit", "-f", str(job_file), "--dry-run", "--wait")
    assert exit_.value.code == EXIT["usage"]


def test_whoami_names_the_person_the_token_and_the_teams(gpuctl, member):
    code, out, _ = gpuctl("whoami")
    lines = out.splitlines()
    assert code == EXIT["ok"] and lines[0] == member.username
    assert lines[1].startswith("token: test (gpp_") and "team vision, scopes cancel read submit" in lines[1]
    assert [line.split() for line in lines[2:]] == [["TEAM", "ROLE"], ["vision", "member"]]


def test_flavors_lists_the_teams_quotas_with_what_is_free(gpuctl, job_file, flavor):
    gpuctl("submit", "-f", str(job_file))
    Job.objects.update(state=State.RUNNING, gpus_in_use=8)
    code, out, _ = gpuctl("-o", "json", "flavors")
    rows = json.loads(out)
    assert code == EXIT["ok"] and [(r["flavor"], r["team"], r["nominal_gpus"]) for r in rows] == [("h100", "vision", 8)]
    assert (rows[0]["running_gpus"], rows[0]["free_gpus"], rows[0]["gpus_per_node"]) == (8, 0, 8)
    code, out, _ = gpuctl("flavors")
    assert out.splitlines()[0].split()[:3] == ["FLAVOR", "TEAM", "MODEL"]
    assert out.splitlines()[1].split()[:2] == ["h100", "vision"]


def test_flavors_are_those_of_the_persons_teams_and_team_narrows_them(gpuctl, member, flavor, monkeypatch):
    from tenants.models import Membership

    from ..builders import make_quota, make_team
    from ..support.api import issue_token

    make_quota(make_team("nlp", members={member: Membership.Role.MEMBER}), flavor, nominal_gpus=4)
    make_quota(make_team("strangers"), flavor, nominal_gpus=16)
    monkeypatch.setenv("GPUPLATFORM_TOKEN", issue_token(member))  # all of the member's teams
    rows = json.loads(gpuctl("-o", "json", "flavors")[1])
    assert [(r["team"], r["nominal_gpus"]) for r in rows] == [("nlp", 4), ("vision", 8)]
    rows = json.loads(gpuctl("-o", "json", "flavors", "--team", "nlp")[1])
    assert [(r["team"], r["free_gpus"]) for r in rows] == [("nlp", 4)]


def test_with_json_an_api_error_is_json_on_stderr(gpuctl, monkeypatch):
    monkeypatch.setenv("GPUPLATFORM_TOKEN", "gpp_0000000000000000")
    code, out, err = gpuctl("-o", "json", "list")
    assert code == EXIT["auth"] and out == ""
    assert json.loads(err) == {"error": {
        "code": "auth", "exit_code": 5,
        "message": "not allowed (401 authentication_failed): Unknown API token. Check GPUPLATFORM_TOKEN.",
        "details": {"status": 401, "api_code": "authentication_failed", "fields": {}}}}


def test_with_json_field_errors_are_in_the_details(gpuctl, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(JOB_YAML.replace("gpus_per_worker: 4", "gpus_per_worker: 9"))
    code, _, err = gpuctl("submit", "-f", str(bad), "-o", "json")
    error = json.loads(err)["error"]
    assert code == EXIT["invalid"] and error["code"] == "invalid" and error["exit_code"] == 4
    assert "gpus_per_worker" in error["details"]["fields"]


@pytest.mark.parametrize("argv", [["-o", "json", "list", "--limit", "0"], ["list", "--output=json", "--bogus"],
                                  ["-o", "json", "nonsense"]])
def test_with_json_a_usage_error_is_json_on_stderr(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    error = json.loads(capsys.readouterr().err)["error"]
    assert exit_.value.code == EXIT["usage"] == error["exit_code"] and error["code"] == "usage"


def test_with_json_missing_configuration_is_json_on_stderr(monkeypatch, capsys):
    monkeypatch.delenv("GPUPLATFORM_URL", raising=False)
    assert main(["list", "-o", "json"]) == EXIT["usage"]
    assert "GPUPLATFORM_URL is not set" in json.loads(capsys.readouterr().err)["error"]["message"]


def test_every_argument_of_every_command_has_help():
    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert {"submit", "wait", "status", "list", "cancel", "stop", "start", "exempt", "logs", "whoami",
            "flavors"} == set(commands.choices)
    for name, command in [("gpuctl", parser), *commands.choices.items()]:
        for action in command._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{name} {action.dest}: give it a help string"
    assert all(choice.help for choice in commands._choices_actions)
