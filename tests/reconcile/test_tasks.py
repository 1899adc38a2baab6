"""Reconcile tasks against the in-memory cluster: render, apply, prune, record."""

import pytest
from django.core.management import call_command

from cluster import PermanentError, TransientError
from gpuplatform.owners import prune_orphans
from jobs import actions
from jobs.lifecycle import State
from jobs.manifests import JOB_KINDS
from jobs.models import Job
from jobs.tasks import reconcile_job
from quotas.manifests import QUOTA_KINDS
from quotas.models import Scheduler
from quotas.tasks import reconcile_cluster_objects, reconcile_team_quotas
from tenants.manifests import TEAM_KINDS
from tenants.models import Team
from tenants.tasks import reconcile_team

from ..builders import make_flavor, make_job, make_quota

pytestmark = pytest.mark.django_db


def reconcile_whole_team(team_id: int) -> int:
    """What the sweep does for a team: its own objects, then its quotas'."""
    return reconcile_team(team_id) + reconcile_team_quotas(team_id)


def names(fake, kind):
    return sorted(o["metadata"]["name"] for o in fake.stored(kind=kind))


def submitted(team, flavor, **fields) -> Job:
    job = make_job(team, flavor, **fields)
    job.submit()
    return job


def test_reconciling_a_team_creates_its_objects_and_marks_it_ready(fake, team, flavor):
    make_quota(team, flavor)
    assert reconcile_whole_team(team.pk) > 0
    assert names(fake, "Namespace") == ["team-vision"]
    assert names(fake, "ClusterQueue") == ["team-vision-h100"]
    team.refresh_from_db()
    assert team.status == Team.Status.READY


def test_a_second_team_reconcile_writes_nothing(fake, team, flavor):
    make_quota(team, flavor)
    reconcile_whole_team(team.pk)
    fake.reset_counts()
    assert reconcile_whole_team(team.pk) == 0
    assert fake.writes == 0
    # One LIST per kind answers for every object; only the Namespace (not a pruned kind) is read alone.
    assert dict(fake.requests) == {"LIST": len(TEAM_KINDS) + len(QUOTA_KINDS), "GET": 1}


def test_removing_a_quota_prunes_its_queues_only(fake, team, flavor):
    quota = make_quota(team, flavor)
    make_quota(team, make_flavor("a100", scheduler=Scheduler.VOLCANO))
    reconcile_whole_team(team.pk)
    quota.delete()
    reconcile_whole_team(team.pk)
    assert names(fake, "ClusterQueue") == [] and names(fake, "LocalQueue") == []
    assert names(fake, "Queue") == ["team-vision-a100"]
    assert names(fake, "Namespace") == ["team-vision"]


def test_a_refused_team_is_marked_error_with_the_servers_message(fake, team):
    fake.fail_next("PATCH", PermanentError("namespaces is forbidden: no", status=403))
    reconcile_team(team.pk)
    team.refresh_from_db()
    assert team.status == Team.Status.ERROR
    assert "namespaces is forbidden" in team.status_message


def test_transient_errors_are_retried_until_they_pass(fake, team):
    fake.fail_next("GET", TransientError("connection refused"), times=2)
    result = reconcile_team.apply(args=[team.pk])
    assert result.get() > 0
    team.refresh_from_db()
    assert team.status == Team.Status.READY


def test_permanent_errors_are_not_retried(fake, team):
    fake.fail_next("PATCH", PermanentError("forbidden", status=403))
    reconcile_team.apply(args=[team.pk])
    assert fake.requests["PATCH"] == 1


def test_a_submitted_job_is_applied_and_queued(fake, team, flavor):
    make_quota(team, flavor)
    job = submitted(team, flavor, workers=2)
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == State.QUEUED
    [batch] = fake.stored("batch/v1", "Job")
    assert batch["spec"]["suspend"] is True
    assert names(fake, "Namespace") == ["team-vision"]  # the team came first


def test_a_second_job_reconcile_writes_nothing(fake, team, flavor):
    job = submitted(team, flavor)
    reconcile_job(job.pk)
    fake.reset_counts()
    reconcile_job(job.pk)
    assert fake.writes == 0


def test_a_draft_is_not_sent_to_the_cluster(fake, team, flavor):
    job = make_job(team, flavor)
    reconcile_job(job.pk)
    assert fake.stored() == [] and fake.writes == 0


def test_cancelling_removes_the_objects_and_the_next_look_that_finds_nothing_left_ends_it(fake, team, flavor):
    job = submitted(team, flavor, workers=2)
    reconcile_job(job.pk)
    job.refresh_from_db()
    job.transition(State.CANCELLING, reason="CancelRequested")
    reconcile_job(job.pk)
    assert fake.stored("batch/v1", "Job") == [] and fake.stored("v1", "Service") == []
    job.refresh_from_db()
    assert job.state == State.CANCELLING  # just deleted: the garbage collector deletes its pods after it
    reconcile_job(job.pk)  # the sweep's
    job.refresh_from_db()
    assert job.state == State.CANCELLED


def test_a_cancelling_job_whose_pods_are_still_there_stays_cancelling(fake, team, flavor):
    job = submitted(team, flavor)
    reconcile_job(job.pk)
    fake.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "pod-0", "namespace": team.namespace_name, "labels": {
            "app.kubernetes.io/managed-by": "gpuplatform", "gpuplatform.io/job": str(job.pk)}},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    Job.objects.get(pk=job.pk).transition(State.CANCELLING, reason="CancelRequested")
    fake.reset_counts()
    reconcile_job(job.pk)  # the cancel's: deletes and returns, without a look at the pods
    assert fake.requests["LIST"] == len(JOB_KINDS) and fake.requests["DELETE"] > 0
    assert Job.objects.get(pk=job.pk).state == State.CANCELLING
    for _ in range(2):  # sweeps: the pod is still there
        reconcile_job(job.pk)
        assert Job.objects.get(pk=job.pk).state == State.CANCELLING
    fake.remove("v1", "Pod", "pod-0", team.namespace_name)
    reconcile_job(job.pk)
    assert Job.objects.get(pk=job.pk).state == State.CANCELLED


def test_a_cancelling_job_the_cluster_refuses_to_remove_stays_cancelling(fake, team, flavor):
    job = submitted(team, flavor)
    reconcile_job(job.pk)
    Job.objects.get(pk=job.pk).transition(State.CANCELLING, reason="CancelRequested")
    fake.fail_next("DELETE", PermanentError('jobs.batch "x" is forbidden', status=403))
    reconcile_job(job.pk)
    job = Job.objects.get(pk=job.pk)
    assert job.state == State.CANCELLING and job.finished_at is None
    assert job.events.filter(reason="RemovalRefused").exists()
    reconcile_job(job.pk)  # the next sweep's removes it; the one after finds nothing left
    reconcile_job(job.pk)
    assert Job.objects.get(pk=job.pk).state == State.CANCELLED


def test_a_job_the_cluster_refuses_fails_with_the_message(fake, team, flavor):
    job = submitted(team, flavor)
    reconcile_whole_team(team.pk)
    fake.fail_next("PATCH", PermanentError('Job.batch "x" is invalid: spec.template: Invalid value', status=422))
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == State.FAILED
    assert "is invalid" in job.message and job.reason == "Rejected"


def test_a_finished_training_job_is_never_reapplied(fake, team, flavor):
    job = submitted(team, flavor)
    reconcile_job(job.pk)
    job.refresh_from_db()
    for state in (State.ADMITTED, State.RUNNING, State.SUCCEEDED):
        assert job.transition(state)
    fake.remove("batch/v1", "Job", fake.stored("batch/v1", "Job")[0]["metadata"]["name"], "team-vision")
    fake.reset_counts()
    reconcile_job(job.pk)
    assert fake.stored("batch/v1", "Job") == [] and fake.writes == 0


def test_a_deleted_row_is_a_quiet_no_op(fake):
    assert reconcile_job(424242) == 0
    assert reconcile_team(424242) == 0


def test_cluster_objects_cover_flavors_and_are_pruned_when_removed(fake, flavor):
    reconcile_cluster_objects()
    assert names(fake, "ResourceFlavor") == ["h100"]
    flavor.delete()
    reconcile_cluster_objects()
    assert names(fake, "ResourceFlavor") == []


def test_offboarding_removes_everything_and_the_row(fake, team, flavor):
    make_quota(team, flavor)
    reconcile_job(submitted(team, flavor).pk)
    Team.objects.filter(pk=team.pk).update(status=Team.Status.DELETING)
    reconcile_whole_team(team.pk)
    assert fake.stored() == []
    assert not Team.objects.filter(pk=team.pk).exists()


def test_offboarding_leaves_the_admission_parameters_to_go_with_the_namespace(fake, team, flavor):
    """Without its parameters the admission policy refuses every pod write in the namespace,
    the Job controller's finalizer removal included: deleted first, they left the team's pods
    Terminating for ever, holding their GPUs (seen on the local cluster)."""
    from tenants.admission import PARAMS_NAME

    make_quota(team, flavor)
    reconcile_job(submitted(team, flavor).pk)
    deleted = []
    delete = fake._send_delete

    def recording(ref, *args):
        deleted.append((ref.kind, ref.name))
        return delete(ref, *args)

    fake._send_delete = recording
    Team.objects.filter(pk=team.pk).update(status=Team.Status.DELETING)
    reconcile_whole_team(team.pk)
    assert ("ConfigMap", PARAMS_NAME) not in deleted
    assert deleted[-1] == ("Namespace", team.namespace_name) and fake.stored() == []


def test_reconcile_command_prints_changes_and_request_counts(fake, team, flavor, capsys):
    make_quota(team, flavor)
    submitted(team, flavor)
    call_command("reconcile", "--all", "--parallel", "1")
    first = capsys.readouterr().out
    assert "created   Namespace team-vision" in first and "created   ClusterQueue" in first
    assert "[3/3] job vision/" in first and "API requests:" in first
    assert not first.splitlines()[-1].startswith("0 writes")
    call_command("reconcile", "--all", "--parallel", "1")
    second = capsys.readouterr().out
    assert "0 writes" in second and "PATCH" not in second


@pytest.mark.django_db(transaction=True)
def test_reconcile_command_runs_teams_in_parallel(fake, flavor, capsys):
    from ..builders import make_team

    for number in range(6):
        make_quota(make_team(f"t{number}"), flavor)
    call_command("reconcile", "--all", "--parallel", "4")
    assert sorted(o["metadata"]["name"] for o in fake.stored(kind="ClusterQueue")) == [
        f"team-t{n}-h100" for n in range(6)]
    assert set(Team.objects.values_list("status", flat=True)) == {Team.Status.READY}
    call_command("reconcile", "--all", "--parallel", "4")
    assert "0 writes" in capsys.readouterr().out.splitlines()[-1]


def test_an_unreachable_broker_does_not_fail_the_submission(team, flavor, owner, monkeypatch,
                                                           django_capture_on_commit_callbacks, caplog):
    """The row is saved first; the sweep will reconcile it when the broker is back."""
    from kombu.exceptions import OperationalError

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(reconcile_job, "delay", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        job = actions.submit(team=team, submitter=owner, flavor=flavor, name="offline",
                                 image="ghcr.io/x/train:1")
    assert Job.objects.get(pk=job.pk).state == State.SUBMITTED
    assert "the sweep will pick it up" in caplog.text


def test_a_cancelling_job_is_left_to_its_own_reconcile_which_removes_it_then_the_end_is_seen(fake, team, flavor, owner):
    make_quota(team, flavor)
    job = submitted(team, flavor)
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.request_cancel(owner)
    assert prune_orphans(fake) == 0  # the sweep leaves it: accounting charges until it ends
    assert names(fake, "Job") != []
    reconcile_job(job.pk)
    assert names(fake, "Job") == []
    assert prune_orphans(fake) == 0
    reconcile_job(job.pk)  # the next look finds nothing left
    job.refresh_from_db()
    assert job.state == State.CANCELLED
