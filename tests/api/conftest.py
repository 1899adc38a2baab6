"""Every API test records the reconciles it schedules instead of needing a broker (the
fixtures: tests/fixtures/api.py)."""

import pytest


@pytest.fixture(autouse=True)
def _no_broker(scheduled_reconciles):
    """``scheduled_reconciles`` for every test here, asked for or not."""


@pytest.fixture
def gpuctl_quota(team, flavor):
    """Room for the gpuctl job file's 2 x 4 GPUs: its verdict is "now", not "never"."""
    from ..builders import make_quota

    return make_quota(team, flavor, nominal_gpus=8)


@pytest.fixture
def gpuctl(live_server, member, team, flavor, gpuctl_quota, monkeypatch, capsys):
    """Run ``gpuctl ARGS`` in-process against the live server as the member (a token of
    the team); returns (exit code, stdout, stderr)."""
    from gpuctl.cli import main

    from ..support.api import issue_token

    monkeypatch.setenv("GPUPLATFORM_URL", live_server.url)
    monkeypatch.setenv("GPUPLATFORM_TOKEN", issue_token(member, team=team))
    monkeypatch.setenv("GPUPLATFORM_RETRY_BACKOFF", "0")

    def run(*args):
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def job_file(tmp_path):
    from ..support.gpuctl import JOB_YAML

    path = tmp_path / "job.yaml"
    path.write_text(JOB_YAML)
    return path
