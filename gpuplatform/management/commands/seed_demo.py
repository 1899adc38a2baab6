"""Create demo flavors, teams, quotas, users and jobs; safe to run again."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from jobs.lifecycle import State
from jobs.models import Job
from notifications.demo import seed_notifications
from quotas.demo import seed_console
from quotas.models import Cohort, GpuFlavor, PriorityClass, Quota, Scheduler
from tenants.models import Membership, Team
from tenants.roles import ensure_quota_manager_group
from workloads.kinds import inference, training

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _pool(pool: str, product: str) -> dict:
    # Must match the fake nodes of deploy/local-cluster.
    return {"gpuplatform.io/pool": pool, "nvidia.com/gpu.product": product}


# The pools' networks (the fake nodes' labels and rdma/hca capacity say the same): the H100s
# train over InfiniBand with an RDMA device per pod, the others over TCP.
INFINIBAND = dict(network_fabric="infiniband", nccl_ib_hca="mlx5", nccl_net_gdr_level="PHB",
                  rdma_resources={"rdma/hca": 1})
TCP = dict(network_fabric="tcp", nccl_socket_ifname="eth0")
# The H100s' racks and block, as the fake nodes are labelled (docs/topology.md).
TOPOLOGY = dict(topology_block_label="gpuplatform.io/block", topology_rack_label="gpuplatform.io/rack")

FLAVORS = [
    dict(name="h100", display_name="NVIDIA H100 80GB", scheduler=Scheduler.KUEUE, gpu_model="H100 80GB",
         resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8, cost_per_gpu_hour="3.50",
         node_labels=_pool("h100", "NVIDIA-H100-80GB-HBM3"), **INFINIBAND, **TOPOLOGY),
    dict(name="a100", display_name="NVIDIA A100 80GB", scheduler=Scheduler.VOLCANO, gpu_model="A100 80GB",
         resource_name="nvidia.com/gpu", gpu_memory_gib=80, gpus_per_node=8, cost_per_gpu_hour="2.20",
         node_labels=_pool("a100", "NVIDIA-A100-SXM4-80GB"), **TCP, **TOPOLOGY),
    dict(name="mig-1g-10gb", display_name="A100 MIG 1g.10gb slice", scheduler=Scheduler.KUEUE, gpu_model="A100 80GB",
         resource_name="nvidia.com/mig-1g.10gb", gpu_memory_gib=10, gpus_per_node=14, gpu_sharing="mig",
         cost_per_gpu_hour="0.40", node_labels=_pool("mig", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"), **TCP),
    dict(name="t4-shared", display_name="T4, time-sliced x4", scheduler=Scheduler.KUEUE, gpu_model="T4",
         resource_name="nvidia.com/gpu", gpu_memory_gib=16, gpus_per_node=16, cost_per_gpu_hour="0.15",
         gpu_sharing="time-slicing", replicas_per_gpu=4,
         node_labels=_pool("timesliced", "Tesla-T4-SHARED"), **TCP),
    dict(name="l4-mps", display_name="L4, MPS x4", scheduler=Scheduler.KUEUE, gpu_model="L4",
         resource_name="nvidia.com/gpu.shared", gpu_memory_gib=24, gpus_per_node=16, cost_per_gpu_hour="0.20",
         gpu_sharing="mps", replicas_per_gpu=4, node_labels=_pool("mps", "NVIDIA-L4-SHARED"), **TCP),
]

PRIORITIES = [
    ("high", 1000, "Deadlines; may preempt lower priorities in the cohort."),
    ("normal", 100, "The default for interactive and training work."),
    ("low", 10, "Sweeps and backfill; the first to be preempted."),
]

# username -> (password, first name, platform role)
USERS = {
    "admin": ("admin-demo-pass", "Ada", "superuser"),
    "quinn": ("quinn-demo-pass", "Quinn", "quota manager"),
    "alice": ("alice-demo-pass", "Alice", "researcher"),
    "bob": ("bob-demo-pass", "Bob", "researcher"),
    "carol": ("carol-demo-pass", "Carol", "researcher"),
}

TEAMS = {
    "vision": ("Computer Vision", {"alice": "owner", "bob": "member", "carol": "viewer"},
               [("h100", 16, 8, 8), ("a100", 8, None, None), ("mig-1g-10gb", 7, None, None)]),
    "nlp": ("Language Models", {"bob": "owner", "alice": "viewer"},
            [("h100", 8, 16, None), ("a100", 8, None, None), ("t4-shared", 8, None, None),
             ("l4-mps", 8, None, None)]),
}

TRAINING, INFERENCE = training.NAME, inference.NAME
# team, name, submitter, flavor, kind, workers, gpus, path through the lifecycle
JOBS = [
    ("vision", "resnet-baseline", "alice", "h100", TRAINING, 1, 1,
     [State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING, State.SUCCEEDED]),
    ("vision", "vit-large-ddp", "bob", "h100", TRAINING, 2, 8,
     [State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING]),
    ("vision", "clip-sweep", "alice", "h100", TRAINING, 4, 8, [State.SUBMITTED, State.QUEUED]),
    ("vision", "mig-notebook-eval", "alice", "mig-1g-10gb", TRAINING, 1, 1, []),
    ("nlp", "llama-serve", "bob", "a100", INFERENCE, 1, 2,
     [State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING]),
    ("nlp", "bert-finetune", "bob", "t4-shared", TRAINING, 1, 1,
     [State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING, State.FAILED]),
    ("nlp", "embeddings-mps", "bob", "l4-mps", INFERENCE, 1, 1,
     [State.SUBMITTED, State.QUEUED, State.ADMITTED, State.RUNNING]),
]
# GPU memory budgets (GiB per GPU or share), as the form's model-size presets suggest.
GPU_MEMORY = {"bert-finetune": 3, "embeddings-mps": 5, "llama-serve": 18}

REASONS = {
    State.SUBMITTED: ("Submitted", "Waiting for the cluster."),
    State.QUEUED: ("WaitingForQuota", "Waiting for quota in the team's queue."),
    State.ADMITTED: ("Admitted", "Quota reserved; pods are being created."),
    State.RUNNING: ("Running", "All workers are running."),
    State.SUCCEEDED: ("Completed", "All workers finished successfully."),
    State.FAILED: ("BackoffLimitExceeded", "A worker exited with code 1 three times."),
}


class Command(BaseCommand):
    help = "Create demo data (flavors, cohort, teams, quotas, users, jobs). Idempotent."

    @transaction.atomic
    def handle(self, *args, **options):
        flavors = {}
        for spec in FLAVORS:
            defaults = dict(spec, node_taints=[GPU_TAINT], tolerations=[GPU_TOLERATION])
            name = defaults.pop("name")
            flavors[name], _ = GpuFlavor.objects.update_or_create(name=name, defaults=defaults)
            flavors[name].full_clean()  # the demo's hardware is declared as a quota manager would
        research, _ = Cohort.objects.update_or_create(
            name="research", defaults={"description": "Research teams lend each other idle H100s."}
        )
        priorities = {
            name: PriorityClass.objects.update_or_create(
                name=name, defaults={"value": value, "description": text}
            )[0]
            for name, value, text in PRIORITIES
        }
        users = self._users()
        for slug, (display, members, quotas) in TEAMS.items():
            # Both teams may run at "normal"; only vision (deadlines) may preempt at "high".
            ceiling = dict((name, value) for name, value, _ in PRIORITIES)["high" if slug == "vision" else "normal"]
            team, _ = Team.objects.update_or_create(
                slug=slug, defaults={"display_name": display, "max_priority_value": ceiling})
            for username, role in members.items():
                Membership.objects.update_or_create(team=team, user=users[username], defaults={"role": role})
            for flavor, nominal, borrow, lend in quotas:
                in_cohort = borrow is not None or lend is not None
                Quota.objects.update_or_create(
                    team=team, flavor=flavors[flavor],
                    defaults=dict(nominal_gpus=nominal, borrowing_limit_gpus=borrow,
                                  lending_limit_gpus=lend, cohort=research if in_cohort else None,
                                  cpu_cores=nominal * 12, memory_gib=nominal * 120),
                )
        created = self._jobs(users, flavors, priorities["normal"])
        seed_console(users)  # a pending request and a grant ending soon
        seed_notifications(users)  # a team webhook with its delivery log

        self.stdout.write(self.style.SUCCESS(
            f"Demo data ready: {len(flavors)} flavors, {len(TEAMS)} teams, {created} new jobs."
        ))
        self.stdout.write("Logins (demo only):")
        for username, (password, _, role) in USERS.items():
            self.stdout.write(f"  {username:<6} / {password:<16} {role}")

    def _users(self) -> dict:
        User = get_user_model()
        managers = ensure_quota_manager_group()
        users = {}
        for username, (password, first, role) in USERS.items():
            user, _ = User.objects.get_or_create(
                username=username, defaults={"first_name": first, "email": f"{username}@example.org"}
            )
            user.is_superuser = role == "superuser"
            user.is_staff = role in ("superuser", "quota manager")
            user.set_password(password)  # demo logins always match what is printed
            user.save()
            if role == "quota manager":
                user.groups.add(managers)
            users[username] = user
        return users

    def _jobs(self, users, flavors, priority) -> int:
        created = 0
        for slug, name, submitter, flavor, kind, workers, gpus, path in JOBS:
            team = Team.objects.get(slug=slug)
            if Job.objects.filter(team=team, name=name).exists():
                continue
            fields = dict(
                team=team, name=name, submitter=users[submitter], flavor=flavors[flavor], kind=kind,
                image="ghcr.io/example/trainer:2.4" if kind == TRAINING else "ghcr.io/example/serve:1.0",
                command=["torchrun"] if kind == TRAINING else ["python", "-m", "serve"],
                args=["train.py", "--epochs", "10"] if kind == TRAINING else ["--port", "8000"],
                env={"WANDB_MODE": "offline"}, workers=workers, gpus_per_worker=gpus, gpu_memory_gib=GPU_MEMORY.get(name),
                # Priority classes are Kueue's: a Volcano flavor refuses them.
                priority=priority if flavors[flavor].scheduler == Scheduler.KUEUE else None,
            )
            if kind == INFERENCE:
                fields.update(port=8000, min_replicas=1, max_replicas=3, readiness_path="/healthz",
                              readiness_initial_delay_seconds=120, autoscaling_target_cpu_percent=70)
            job = Job(**fields)
            job.full_clean()
            job.save()
            for target in path:
                reason, message = REASONS[target]
                job.transition(target, reason=reason, message=message)
            created += 1
        return created
