"""The team namespaces' admission policy, built from what each kind of work declares it puts there
(`Integration.admits`): today's kinds give the policy they gave when it was written by hand, so
each rule still admits and refuses the same objects (the live tests, tests/cluster and
tests/security, run them on the cluster's real admission)."""

from tenants.admission import ALSO_MATCHED, fragments, matched_resources, render_admission
from workloads.kinds.admission import Queue

VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")


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
        "ray.io": ["rayclusters", "rayjobs", "rayservices"]}
    refused = {name for names in ALSO_MATCHED.values() for name in names} - {"pods/ephemeralcontainers"}
    assert refused == {"replicationcontrollers", "daemonsets", "cronjobs", "rayservices"}
    assert not refused & {name for names in fragments().resources().values() for name in names}


def test_the_policy_admits_the_kinds_the_platform_renders_and_what_their_controllers_make():
    assert fragments().kinds() == ["Deployment", "Job", "Pod", "RayCluster", "RayJob", "ReplicaSet", "Service",
                                   "StatefulSet"]
    assert _rule("The platform runs").startswith(f"variables.volcano || object.kind in {fragments().kinds()}")


def test_only_what_controllers_make_goes_without_our_labels_and_pods_need_a_controller():
    assert set(fragments().unlabelled()) == {"Pod", "ReplicaSet", "Service"}
    assert fragments().controlled() == ["Pod", "ReplicaSet"]
    assert _rule("Pods and ReplicaSets").startswith("!(object.kind in ['Pod', 'ReplicaSet']) || ")


def test_each_made_kind_is_owned_only_by_what_makes_it():
    owners = {kind: {o.kind for o in by} for kind, by in fragments().owners().items()}
    assert owners == {
        "Pod": {("batch/v1", "Job"), VOLCANO_JOB, ("apps/v1", "ReplicaSet"), ("ray.io/v1", "RayCluster"),
                ("apps/v1", "StatefulSet")},
        "ReplicaSet": {("apps/v1", "Deployment")},
        "Service": {VOLCANO_JOB, ("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayJob")},
        "RayCluster": {("ray.io/v1", "RayJob")},
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
                         ("apps/v1", "StatefulSet")},
        (Queue.VOLCANO,): {VOLCANO_JOB},
        (Queue.KUEUE, Queue.VOLCANO_PODS): {("apps/v1", "Deployment")},
    }
    kueue = _rule("A Job, RayJob, RayCluster or StatefulSet")
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
                  "volumeClaimTemplates", "Training: a Job or a Volcano Job", "Notebook: a StatefulSet"):
        assert words in messages, words
