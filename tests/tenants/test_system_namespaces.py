"""System namespaces cannot be taken over: whatever TEAM_NAMESPACE_PREFIX is (empty too), no
team's namespace is Kubernetes', the platform's, Kueue's or Volcano's; and should one ever
map there (a prefix changed after the team was made), nothing is rendered into it and
offboarding never deletes it."""

import pytest
from django.core.exceptions import ValidationError

from core.ownership import owned
from jobs.lifecycle import State
from jobs.tasks import reconcile_job
from quotas.manifests import render_team_quotas
from quotas.tasks import reconcile_team_quotas
from tenants.manifests import render_namespace, render_team
from tenants.models import SystemNamespace, Team
from tenants.tasks import reconcile_team

from ..builders import make_job, make_quota

pytestmark = pytest.mark.django_db

SYSTEM = ["kube-system", "kube-public", "kube-node-lease", "kube-anything", "default",
          "gpuplatform-system", "kueue-system", "volcano-system", "volcano-monitoring"]


def test_team_named_kube_system_is_refused_with_empty_prefix(settings):
    settings.TEAM_NAMESPACE_PREFIX = ""
    with pytest.raises(ValidationError) as exc:
        Team(slug="kube-system", display_name="Mine now").full_clean()
    assert "belongs to the cluster or the platform" in exc.value.message_dict["slug"][0]


@pytest.mark.parametrize("slug", SYSTEM)
def test_no_system_namespace_can_be_a_team_with_empty_prefix(settings, slug):
    settings.TEAM_NAMESPACE_PREFIX = ""
    with pytest.raises(ValidationError):
        Team(slug=slug, display_name=slug).full_clean()


def test_the_platforms_own_namespace_follows_its_setting(settings):
    settings.TEAM_NAMESPACE_PREFIX = ""
    settings.PLATFORM_NAMESPACE = "gpu-ops"
    with pytest.raises(ValidationError):
        Team(slug="gpu-ops", display_name="Ops").full_clean()


def test_a_prefix_that_lands_on_a_system_namespace_is_refused(settings):
    settings.TEAM_NAMESPACE_PREFIX = "kube-"
    with pytest.raises(ValidationError):
        Team(slug="vision", display_name="Vision").full_clean()


@pytest.mark.parametrize("slug", ["vision", "kube", "defaults", "my-kube-system"])
def test_ordinary_names_pass_with_empty_prefix(settings, slug):
    settings.TEAM_NAMESPACE_PREFIX = ""
    Team(slug=slug, display_name=slug).full_clean()


def test_with_the_default_prefix_a_team_called_kube_system_gets_its_own_namespace(settings):
    Team(slug="kube-system", display_name="Cluster people").full_clean()  # team-kube-system


@pytest.fixture
def squatter(settings, team, flavor):
    """A team made under the default prefix whose namespace became `default` when an
    operator later emptied TEAM_NAMESPACE_PREFIX."""
    team = Team.objects.create(slug="default", display_name="Default")
    make_quota(team, flavor)
    settings.TEAM_NAMESPACE_PREFIX = ""
    return team


def test_a_system_namespace_is_never_rendered(squatter):
    with pytest.raises(SystemNamespace):
        render_namespace(squatter)
    with pytest.raises(SystemNamespace):
        render_team(squatter, [])
    with pytest.raises(SystemNamespace):
        render_team_quotas(squatter, list(squatter.quotas.all()))


def test_reconciling_a_team_mapped_to_a_system_namespace_writes_nothing_and_says_why(fake, squatter):
    reconcile_team(squatter.pk)
    reconcile_team_quotas(squatter.pk)
    assert fake.stored() == []
    squatter.refresh_from_db()
    assert squatter.status == Team.Status.ERROR
    assert "default belongs to the cluster" in squatter.status_message


def test_a_job_of_such_a_team_is_refused_instead_of_applied(fake, squatter, flavor):
    job = make_job(squatter, flavor)
    job.submit()
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == State.FAILED and "system namespace" in job.message
    assert fake.stored() == []


def test_offboarding_never_deletes_a_system_namespace(fake, settings, squatter):
    # Labelled for the team before this guard existed; still the cluster's namespace.
    fake.put(owned({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}, team="default"))
    fake.put(owned({"apiVersion": "v1", "kind": "LimitRange",
                    "metadata": {"name": "defaults", "namespace": "default"}, "spec": {}}, team="default"))
    Team.objects.filter(pk=squatter.pk).update(status=Team.Status.DELETING)
    reconcile_team(squatter.pk)
    assert [o["metadata"]["name"] for o in fake.stored(kind="Namespace")] == ["default"]
    assert fake.stored(kind="LimitRange") == []  # what the team put there is still removed
    assert not Team.objects.filter(pk=squatter.pk).exists()


def test_a_cancelled_job_of_such_a_team_ends_at_once_without_touching_the_namespace(fake, squatter, flavor, owner):
    """Nothing of ours is ever created in or deleted from a system namespace, so no look at the
    cluster could end the cancel: it ends when its reconcile refuses the namespace."""
    job = make_job(squatter, flavor)
    job.submit()
    job.transition(State.CANCELLING, reason="CancelRequested")
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == State.CANCELLED and "system namespace" in job.message
    assert fake.writes == 0
