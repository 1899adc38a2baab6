"""The team namespaces' admission policy, built from what each kind of work declares it puts there
(`Integration.admits`): today's kinds give the policy they gave when it was written by hand, so
each rule still admits and refuses the same objects (the live tests, tests/cluster and
tests/security, run them on the cluster's real admission)."""

from tenants.admission import ALSO_MATCHED, fragments, matched_resources, render_admission
from workloads.kinds.admission import Queue

VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")
TRAIN_JOB, JOBSET = ("trainer.kubeflow.org/v1alpha1", "TrainJob"), ("jobset.x-k8s.io/v1alpha2", "JobSet")
CONTROLLED_BY_A_JOBSET = ("((object.kind == 'Job' && object.apiVersion.startsWith('batch/')) && variables.owners.exists("
                          "o, has(o.controller) && o.controller && (o.kind == 'JobSet' && "
                          "o.apiVersion.startsWith('jobset.x-k8s.io/'))))")


def _validations() -> list[dict]:
    return render_admission()[0]["spec"]["validations"]


def _rule(starts: str) -> str:
    [expression] = [rule["expression"] for rule in _validations() if rule["message"].startswith(starts)]
    return expression


def test_the_policy_matches_what_the_kinds_make_and_the_kinds_it_refuses():
    assert matched_resources() == {
        "": ["pods", "pods/ephemeralcontainers", "replicationcontrollers", "services"],
        "apps": ["daemonsets", "deployments", "replicasets", "statefulsets"],
        "batch": ["cronjobs", "jobs"], "batch.volcano.sh": ["jobs"],
        "jobset.x-k8s.io": ["jobsets"], "ray.io": ["rayclusters", "rayjobs", "rayservices"],
        "trainer.kubeflow.org": ["trainjobs"]}
    refused = {name for names in ALSO_MATCHED.values() for name in names} - {"pods/ephemeralcontainers"}
    assert refused == {"replicationcontrollers", "daemonsets", "cronjobs", "rayservices"}
    assert not refused & {name for names in fragments().resources().values() for name in names}


def test_the_policy_admits_the_kinds_the_platform_renders_and_what_their_controllers_make():
    assert fragments().kinds() == ["Deployment", "Job", "JobSet", "Pod", "RayCluster", "RayJob", "ReplicaSet",
                                   "Service", "StatefulSet", "TrainJob"]
    assert _rule("The platform runs").startswith(f"variables.volcano || object.kind in {fragments().kinds()}")


def test_only_what_controllers_make_goes_without_our_labels_and_pods_need_a_controller():
    assert set(fragments().unlabelled()) == {"Pod", "ReplicaSet", "Service", "JobSet"}
    assert fragments().controlled() == ["Pod", "ReplicaSet", "JobSet"]
    assert _rule("Pods, ReplicaSets and JobSets").startswith("!(object.kind in ['Pod', 'ReplicaSet', 'JobSet']) || ")


def test_each_made_kind_is_owned_only_by_what_makes_it():
    owners = {kind: {o.kind for o in by} for kind, by in fragments().owners().items()}
    assert owners == {
        "Pod": {("batch/v1", "Job"), VOLCANO_JOB, ("apps/v1", "ReplicaSet"), ("ray.io/v1", "RayCluster"),
                ("apps/v1", "StatefulSet")},
        "ReplicaSet": {("apps/v1", "Deployment")},
        "Service": {VOLCANO_JOB, ("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayJob"), JOBSET},
        "RayCluster": {("ray.io/v1", "RayJob")},
        "JobSet": {TRAIN_JOB},
        "Job": {JOBSET},
    }
    rule = _rule("Owner references")
    # Kubernetes' own owners at the version the platform writes, an operator's at any version;
    # anything else (a Job, a Deployment, a StatefulSet...) owned by nothing.
    assert "object.kind == 'ReplicaSet' ? (o.kind == 'Deployment' && o.apiVersion == 'apps/v1') : " in rule
    assert "(o.kind == 'Job' && o.apiVersion.startsWith('batch.volcano.sh/'))" in rule
    assert rule.endswith(" : false)")


def test_each_queued_kind_names_one_of_the_teams_queues_the_way_its_scheduler_says():
    queued = {queues: {o.kind for o in objects} for queues, objects in fragments().queues().items()}
    assert queued == {
        (Queue.KUEUE,): {("batch/v1", "Job"), ("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster"),
                         ("apps/v1", "StatefulSet"), TRAIN_JOB},
        (Queue.VOLCANO,): {VOLCANO_JOB},
        (Queue.KUEUE, Queue.VOLCANO_PODS): {("apps/v1", "Deployment")},
    }
    kueue = _rule("A Job, RayJob, RayCluster, StatefulSet or TrainJob")
    # A batch Job, not a Volcano one (which names its queue in spec.queue).
    assert "(object.kind == 'Job' && object.apiVersion.startsWith('batch/'))" in kueue
    assert "variables.kueueQueue in variables.teamFlavors" in kueue
    assert "object.spec.queue in variables.queues" in _rule("A Volcano Job")
    deployment = _rule("A Deployment")
    assert "variables.kueueQueue in variables.teamFlavors" in deployment and "s.schedulerName == 'volcano'" in deployment


def test_the_messages_name_the_kinds_the_live_tests_read():
    messages = " ".join(rule["message"] for rule in _validations())
    for words in ("nothing else that makes pods", "RayService", "made by the platform's Jobs", "Owner references",
                  "team's own Kueue queues", "Deployment in a team namespace", "team's own queues",
                  "volumeClaimTemplates", "Training: a Job or a Volcano Job", "Notebook: a StatefulSet",
                  "Distributed training (TrainJob): a TrainJob", "Deployments and TrainJobs",
                  "a JobSet's: its TrainJob", "a Job's: its JobSet"):
        assert words in messages, words


def test_a_jobsets_batch_jobs_alone_go_without_a_queue_and_our_labels():
    """A TrainJob waits in the team's queue; the Jobs its JobSet makes name none and carry none
    of our labels. Only a batch Job a JobSet controls is let off: any other still names a queue."""
    assert fragments().made_free() == {("batch/v1", "Job"): [fragments().made_free()[("batch/v1", "Job")][0]]}
    assert fragments().made_free()[("batch/v1", "Job")][0].kind == JOBSET
    assert "Job" not in fragments().unlabelled()
    assert CONTROLLED_BY_A_JOBSET in _rule("Workloads in team namespaces are the platform's")
    kueue = _rule("A Job, RayJob, RayCluster, StatefulSet or TrainJob")
    assert CONTROLLED_BY_A_JOBSET in kueue
    # Volcano's Jobs are not let off theirs.
    assert "JobSet" not in _rule("A Volcano Job")


def test_a_jobsets_pod_templates_are_held_like_every_other_and_a_trainjob_has_none_of_its_own():
    variables = {v["name"]: v["expression"] for v in render_admission()[0]["spec"]["variables"]}
    assert "variables.trainer ? [] : " in variables["templates"]
    assert "variables.jobset ? object.spec.replicatedJobs.map(r, r.template.spec.template.spec)" in variables["templates"]
    assert variables["jobset"] == "object.apiVersion.startsWith('jobset.x-k8s.io/')"
    assert variables["trainer"] == "object.apiVersion.startsWith('trainer.kubeflow.org/')"
