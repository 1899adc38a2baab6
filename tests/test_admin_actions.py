"""Rows the admin writes that must reach the cluster go through the apps' actions: the
team's reconcile, or its quotas' reconcile, is sent once the transaction commits."""

import pytest
from django.urls import reverse
from django.utils import timezone

from quotas import tasks as quota_tasks
from quotas.models import Quota, TrainingRuntime
from tenants import tasks as team_tasks
from workloads.kinds.train_job import TORCH_RUNTIME as TORCH

from .builders import make_quota

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    """The primary keys each reconcile task was sent, by task name."""
    sent = {"team": [], "quotas": []}
    monkeypatch.setattr(team_tasks.reconcile_team, "delay", sent["team"].append)
    monkeypatch.setattr(quota_tasks.reconcile_team_quotas, "delay", sent["quotas"].append)
    return sent


def change_form_data(response, **changes) -> dict:
    """What the admin's change page would post back unchanged, inlines included."""
    forms = [response.context["adminform"].form]
    for inline in response.context["inline_admin_formsets"]:
        forms += [inline.formset.management_form, *inline.formset.forms]
    data = {}
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is None or value is False:
                continue
            data[form.add_prefix(name)] = "on" if value is True else value
    return {**data, **changes}


def test_a_team_edited_in_the_admin_reconciles_its_namespace_after_commit(
    client, quota_manager, team, sent, django_capture_on_commit_callbacks
):
    client.force_login(quota_manager)
    url = reverse("admin:tenants_team_change", args=[team.pk])
    data = change_form_data(client.get(url), display_name="Vision Lab")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(url, data)
        assert sent["team"] == []  # nothing before the commit
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    for callback in callbacks:
        callback()
    team.refresh_from_db()
    assert team.display_name == "Vision Lab"
    assert team.pk in sent["team"]


def test_a_quota_edited_on_the_teams_admin_page_reconciles_the_teams_queues(
    client, quota_manager, team, flavor, sent, django_capture_on_commit_callbacks
):
    quota = make_quota(team, flavor, nominal_gpus=8)
    client.force_login(quota_manager)
    url = reverse("admin:tenants_team_change", args=[team.pk])
    response = client.get(url)
    [quotas] = [i.formset for i in response.context["inline_admin_formsets"] if i.opts.model is Quota]
    data = change_form_data(response, **{f"{quotas.prefix}-0-nominal_gpus": 6})
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, data)
    assert response.status_code == 302
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 6
    assert sent["quotas"] == [team.pk]


def test_a_quota_edited_or_deleted_in_the_admin_reconciles_the_teams_queues(
    client, quota_manager, team, flavor, sent, django_capture_on_commit_callbacks
):
    quota = make_quota(team, flavor, nominal_gpus=8)
    client.force_login(quota_manager)
    url = reverse("admin:quotas_quota_change", args=[quota.pk])
    data = change_form_data(client.get(url), nominal_gpus=4)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, data)
    assert response.status_code == 302
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 4
    assert sent["quotas"] == [team.pk]
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:quotas_quota_delete", args=[quota.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Quota.objects.filter(pk=quota.pk).exists()
    assert sent["quotas"] == [team.pk, team.pk]


def test_an_unchanged_team_page_saved_again_leaves_the_quotas_alone(
    client, quota_manager, team, flavor, sent, django_capture_on_commit_callbacks
):
    make_quota(team, flavor)
    client.force_login(quota_manager)
    url = reverse("admin:tenants_team_change", args=[team.pk])
    data = change_form_data(client.get(url))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, data)
    assert response.status_code == 302
    assert sent["quotas"] == []


@pytest.fixture
def cluster_sent(monkeypatch, sent):
    """`sent`, and how many times the cluster-wide objects' reconcile was sent."""
    calls = []
    monkeypatch.setattr(quota_tasks.reconcile_cluster_objects, "delay", lambda *args: calls.append(args))
    sent["cluster"] = calls
    return sent


def test_a_flavor_edited_in_the_admin_reconciles_the_cluster_objects_and_its_teams_queues(
    client, quota_manager, team, flavor, cluster_sent, django_capture_on_commit_callbacks
):
    make_quota(team, flavor, nominal_gpus=8)
    client.force_login(quota_manager)
    url = reverse("admin:quotas_gpuflavor_change", args=[flavor.pk])
    data = change_form_data(client.get(url), display_name="H100 (SXM)")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(url, data)
        assert cluster_sent["cluster"] == []  # nothing before the commit
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    for callback in callbacks:
        callback()
    assert cluster_sent["cluster"] == [()]
    assert cluster_sent["quotas"] == [team.pk]


def test_a_priority_class_added_in_the_admin_reaches_the_cluster_after_commit(
    client, quota_manager, cluster_sent, django_capture_on_commit_callbacks
):
    client.force_login(quota_manager)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:quotas_priorityclass_add"),
                               {"name": "urgent", "value": "2000", "description": "",
                                "checkpoint_grace_seconds": "30", "minimum_runtime_seconds": "0"})
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    assert cluster_sent["cluster"] == [()] and cluster_sent["quotas"] == []


def test_a_runtime_renamed_in_the_admin_is_unknown_until_the_cluster_is_read_again(
    client, quota_manager, cluster_sent, django_capture_on_commit_callbacks
):
    TrainingRuntime.objects.filter(name=TORCH).update(installed=True, checked_at=timezone.now())
    runtime = TrainingRuntime.objects.get(name=TORCH)
    client.force_login(quota_manager)
    url = reverse("admin:quotas_trainingruntime_change", args=[runtime.pk])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, change_form_data(client.get(url), name="torch-v2"))
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    runtime.refresh_from_db()
    assert (runtime.name, runtime.installed, runtime.checked_at) == ("torch-v2", None, None)
    assert cluster_sent["cluster"] == [()]
