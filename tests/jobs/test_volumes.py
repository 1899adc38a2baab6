"""Team storage (jobs/models/volumes.py, quotas/models/storage.py): a team's storage quota per
class on its ResourceQuota, volumes that fit it, one claim each, jobs that mount them with a
writable home, and a volume a live job mounts kept."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from core.owners import run
from jobs.manifests import render_job, render_volumes
from jobs.models import Job, Volume
from jobs.tasks import TEAM_VOLUMES
from quotas.models import StorageQuota
from quotas.tasks import _render_quotas
from workloads.pods import HOME_PATH, pod_templates_of

from ..builders import build_job, make_job
from ..schemas import validate

pytestmark = pytest.mark.django_db


@pytest.fixture
def storage(team):
    return StorageQuota.objects.create(team=team, storage_class="standard", storage_gib=100, volumes=2)


def volume(team, user, name="datasets", size_gib=40, storage_class="standard"):
    return Volume.objects.add(team=team, user=user, name=name, storage_class=storage_class, size_gib=size_gib)


def main_and_pod(job):
    pod = pod_templates_of(render_job(job)[0])[0]["spec"]
    return pod["containers"][0], pod


# --- the storage quota on the namespace -------------------------------------------------------
def test_a_team_without_storage_quota_may_claim_nothing(team):
    hard = next(o for o in _render_quotas(team) if o["kind"] == "ResourceQuota")["spec"]["hard"]
    assert (hard["persistentvolumeclaims"], hard["requests.storage"]) == ("0", "0")


def test_the_storage_quota_of_each_class_is_on_the_resource_quota(team, storage):
    StorageQuota.objects.create(team=team, storage_class="fast-ssd", storage_gib=10, volumes=1)
    quota = next(o for o in _render_quotas(team) if o["kind"] == "ResourceQuota")
    validate(quota)
    hard = quota["spec"]["hard"]
    assert hard["standard.storageclass.storage.k8s.io/requests.storage"] == "100Gi"
    assert hard["standard.storageclass.storage.k8s.io/persistentvolumeclaims"] == "2"
    assert hard["fast-ssd.storageclass.storage.k8s.io/requests.storage"] == "10Gi"
    assert (hard["persistentvolumeclaims"], hard["requests.storage"]) == ("3", "110Gi")


# --- volumes within the quota -----------------------------------------------------------------
def test_an_owner_creates_a_volume_that_fits(team, owner, storage):
    made = volume(team, owner)
    assert (made.name, made.size_gib, made.created_by) == ("datasets", 40, owner)


def test_a_volume_beyond_the_quota_is_refused_with_what_is_left(team, owner, storage):
    volume(team, owner, size_gib=80)
    with pytest.raises(ValidationError) as err:
        volume(team, owner, name="more", size_gib=30)
    assert err.value.message_dict["size_gib"] == [
        "30 GiB does not fit: the team's volumes of standard claim 80 of its 100 GiB."]


def test_more_volumes_than_the_quota_counts_are_refused(team, owner, storage):
    volume(team, owner, name="a", size_gib=1)
    volume(team, owner, name="b", size_gib=1)
    with pytest.raises(ValidationError) as err:
        volume(team, owner, name="c", size_gib=1)
    assert "its 2 volumes of standard" in err.value.message_dict["name"][0]


def test_a_class_without_a_quota_is_refused_naming_the_teams_classes(team, owner, storage):
    with pytest.raises(ValidationError) as err:
        volume(team, owner, storage_class="fast-ssd")
    assert err.value.message_dict["storage_class"] == ["Team vision has no storage quota on fast-ssd. "
                                                       "Its classes: standard."]


def test_a_volume_name_is_unique_in_the_team(team, owner, storage):
    volume(team, owner, size_gib=1)
    with pytest.raises(ValidationError) as err:
        volume(team, owner, size_gib=1)
    assert "already has a volume of this name" in str(err.value)


@pytest.mark.parametrize("who", ["member", "viewer", "outsider"])
def test_only_owners_and_quota_managers_create_volumes(request, team, storage, who, quota_manager):
    with pytest.raises(PermissionDenied):
        volume(team, request.getfixturevalue(who))
    assert volume(team, quota_manager).created_by == quota_manager


# --- claims -------------------------------------------------------------------------------------
def test_each_volume_is_one_valid_claim_in_the_team_namespace(team, owner, storage):
    volume(team, owner)
    [claim] = render_volumes(team, list(team.volumes.all()))
    validate(claim)
    assert claim["metadata"]["name"] == "datasets" and claim["metadata"]["namespace"] == "team-vision"
    assert claim["spec"] == {"storageClassName": "standard", "accessModes": ["ReadWriteOnce"],
                             "resources": {"requests": {"storage": "40Gi"}}}


def test_the_team_volumes_owner_applies_claims_and_deletes_a_deleted_volumes(team, owner, storage, fake):
    made = volume(team, owner)
    run(fake, TEAM_VOLUMES, team)
    assert [c["metadata"]["name"] for c in fake.stored(kind="PersistentVolumeClaim")] == ["datasets"]
    made.delete_by(owner)
    run(fake, TEAM_VOLUMES, team)
    assert fake.stored(kind="PersistentVolumeClaim") == []


# --- jobs mount them ------------------------------------------------------------------------------
def test_a_job_mounts_its_volumes_with_a_scratch_home(team, flavor, owner, storage):
    volume(team, owner)
    job = make_job(team, flavor, volumes={"datasets": "/data"})
    for obj in render_job(job):
        validate(obj)
    main, pod = main_and_pod(job)
    assert {"name": "vol-0", "mountPath": "/data"} in main["volumeMounts"]
    assert {"name": "home", "mountPath": HOME_PATH} in main["volumeMounts"]
    assert {"name": "vol-0", "persistentVolumeClaim": {"claimName": "datasets"}} in pod["volumes"]
    assert {"name": "home", "emptyDir": {"sizeLimit": "20Gi"}} in pod["volumes"]
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert (env["HOME"], env["XDG_CACHE_HOME"], env["HF_HOME"]) == (
        HOME_PATH, f"{HOME_PATH}/.cache", f"{HOME_PATH}/.cache/huggingface")


def test_a_volume_mounted_at_home_keeps_the_home(team, flavor, owner, storage):
    volume(team, owner, name="home-olivia", size_gib=10)
    job = make_job(team, flavor, kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=1,
                   volumes={"home-olivia": HOME_PATH}, env={"HF_HOME": "/models"})
    for obj in render_job(job):
        validate(obj)
    main, pod = main_and_pod(job)
    assert [m for m in main["volumeMounts"] if m["mountPath"] == HOME_PATH] == [{"name": "vol-0", "mountPath": HOME_PATH}]
    assert not [v for v in pod["volumes"] if v["name"] == "home"]
    env = [e for e in main["env"] if e["name"] == "HF_HOME"]
    assert env == [{"name": "HF_HOME", "value": "/models"}]  # the job's own, once


@pytest.mark.parametrize(("volumes", "said"), [
    ({"nope": "/data"}, "The team has no volume named nope"),
    ({"datasets": "data"}, "absolute path"),
    ({"datasets": "/data/../etc"}, "absolute path"),
    ({"datasets": "/etc/ssl"}, "is a system path"),
    ({"datasets": "/dev/shm"}, "is a system path"),
    ({"datasets": "/tmp"}, "the platform's"),
    (["datasets"], "mapping of volume name to mount path"),
])
def test_a_job_cannot_mount_what_is_not_its_teams_or_where_it_does_not_belong(team, flavor, owner, storage,
                                                                           volumes, said):
    volume(team, owner)
    with pytest.raises(ValidationError) as err:
        build_job(team, flavor, volumes=volumes).full_clean()
    assert said in " ".join(err.value.message_dict["volumes"])


def test_another_teams_volume_cannot_be_mounted(team, flavor, outsider, owner, storage):
    other = outsider.memberships.get().team
    StorageQuota.objects.create(team=other, storage_class="standard", storage_gib=10, volumes=1)
    volume(other, outsider, name="secrets", size_gib=1)
    with pytest.raises(ValidationError) as err:
        build_job(team, flavor, volumes={"secrets": "/data"}).full_clean()
    assert "no volume named secrets" in err.value.message_dict["volumes"][0]


# --- deleting -------------------------------------------------------------------------------------
def test_a_volume_a_live_job_mounts_is_not_deleted_until_the_job_ends(team, flavor, owner, storage):
    made = volume(team, owner)
    job = make_job(team, flavor, name="reader", volumes={"datasets": "/data"})
    job.submit()
    with pytest.raises(ValidationError) as err:
        made.delete_by(owner)
    assert err.value.messages == ["Volume datasets is mounted by reader; cancel or wait for those jobs first."]
    Job.objects.filter(pk=job.pk).update(state=Job.State.SUCCEEDED)
    made.delete_by(owner)
    assert not Volume.objects.exists()


def test_members_cannot_delete_a_volume(team, member, owner, storage):
    made = volume(team, owner)
    with pytest.raises(PermissionDenied):
        made.delete_by(member)
    assert Volume.objects.filter(pk=made.pk).exists()
