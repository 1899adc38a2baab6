"""Capacity at a glance: cluster GPUs from the nodes, promised, in use, borrowed, queued."""

import pytest
from django.urls import reverse

from console.capacity import overview
from jobs.lifecycle import State
from quotas.models import Cohort

from ..builders import make_job, make_quota, make_team

pytestmark = pytest.mark.django_db


def node(name, pool, gpus):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"gpuplatform.io/pool": pool}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}, "capacity": {"nvidia.com/gpu": str(gpus)}}}


@pytest.fixture
def busy(team, flavor, member, outsider):
    """vision: 8 nominal, a 12-GPU job running (4 borrowed) and a 2-GPU job queued;
    other-team: 8 nominal in the same cohort, idle."""
    research = Cohort.objects.create(name="research")
    make_quota(team, flavor, nominal_gpus=8, cohort=research)
    other = team.__class__.objects.get(slug="other-team")
    make_quota(other, flavor, nominal_gpus=8, cohort=research)
    running = make_job(team, flavor, submitter=member, workers=3, gpus_per_worker=4)
    for state in (State.SUBMITTED, State.ADMITTED, State.RUNNING):
        running.transition(state)
    waiting = make_job(team, flavor, submitter=member, gpus_per_worker=2)
    waiting.transition(State.SUBMITTED)
    return research


def test_flavor_cohort_and_team_lines_add_up(fake, busy):
    fake.put(node("gpu-1", "h100", 8))
    fake.put(node("gpu-2", "h100", 4))
    fake.put(node("cpu-1", "none", 0))
    data = overview()
    [h100] = data["flavors"]
    assert (h100.cluster, h100.nominal, h100.in_use, h100.borrowed, h100.queued) == (12, 16, 12, 4, 2)
    assert h100.commitment == "over" and h100.commitment_text == "over-committed by 4"
    [cohort] = data["cohorts"]
    assert (cohort.label, cohort.nominal, cohort.in_use, cohort.borrowed) == ("research", 16, 12, 4)
    vision = next(line for line in data["teams"] if line.label == "vision")
    assert (vision.nominal, vision.in_use, vision.borrowed, vision.queued) == (8, 12, 4, 2)
    assert data["cluster_note"] == ""


def test_under_committed_when_the_cluster_has_more(fake, busy):
    fake.put(node("gpu-1", "h100", 32))
    [h100] = overview()["flavors"]
    assert h100.commitment == "under" and h100.commitment_text == "16 not promised"


def test_without_a_cluster_the_size_is_unknown_and_said_so(busy, settings, tmp_path):
    settings.KUBECONFIG = str(tmp_path / "missing")
    data = overview()
    assert data["flavors"][0].cluster is None and data["flavors"][0].commitment == "unknown"
    assert "No cluster is configured" in data["cluster_note"]


def test_the_capacity_page_for_quota_managers(client_for, quota_manager, busy, settings, tmp_path):
    settings.KUBECONFIG = str(tmp_path / "missing")
    html = client_for(quota_manager).get(reverse("console:capacity")).content.decode()
    assert "Cluster GPUs are unknown" in html and "research" in html and "<svg" in html
    assert "vision" in html and "other-team" in html


def test_the_console_link_is_shown_to_quota_managers_only(client_for, quota_manager, owner, team):
    console = reverse("console:capacity")
    assert console in client_for(quota_manager).get(reverse("dashboard")).content.decode()
    assert console not in client_for(owner).get(reverse("dashboard")).content.decode()


def test_the_capacity_page_pins_its_queries(client_for, quota_manager, busy, settings, tmp_path, django_assert_max_num_queries):
    settings.KUBECONFIG = str(tmp_path / "missing")
    client = client_for(quota_manager)
    client.get(reverse("console:capacity"))
    for index in range(5):
        make_quota(make_team(f"extra{index}"), busy.quotas.first().flavor, nominal_gpus=1)
    # 12, and 4 for this month's allocated vs used GPU-hours per flavor (console.accounting.
    # flavor_totals: its aggregate in a savepoint without JIT, the measured use, the names),
    # and 1 for the cohort quotas of the page's teams whose fair share Kueue is asked for.
    with django_assert_max_num_queries(17):
        client.get(reverse("console:capacity"))
