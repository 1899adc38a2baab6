"""The demo seed creates a coherent world and can run again without duplicating it."""

import pytest
from django.core.management import call_command
from django.test import RequestFactory

from jobs.lifecycle import State
from jobs.models import Job, JobEvent
from quotas.models import GpuFlavor, Quota
from tenants.models import Team

pytestmark = pytest.mark.django_db


def counts():
    return [m.objects.count() for m in (GpuFlavor, Team, Quota, Job, JobEvent)]


def test_seed_demo_is_idempotent_and_prints_logins(capsys):
    call_command("seed_demo")
    first = counts()
    call_command("seed_demo")
    assert counts() == first
    out = capsys.readouterr().out
    assert "quinn  / quinn-demo-pass" in out and "alice  / alice-demo-pass" in out


def test_seed_demo_covers_both_schedulers_and_many_states(client):
    call_command("seed_demo")
    assert set(GpuFlavor.objects.values_list("scheduler", flat=True)) == {"kueue", "volcano"}
    assert {"nvidia.com/gpu", "nvidia.com/mig-1g.10gb"} <= set(GpuFlavor.objects.values_list("resource_name", flat=True))
    states = set(Job.objects.values_list("state", flat=True))
    assert {State.DRAFT, State.QUEUED, State.RUNNING, State.SUCCEEDED, State.FAILED} <= states
    assert client.login(request=RequestFactory().get("/"), username="quinn", password="quinn-demo-pass")
    assert client.get("/admin/quotas/quota/").status_code == 200
    assert client.login(request=RequestFactory().get("/"), username="alice", password="alice-demo-pass")
