"""REST API for jobs: submit (idempotent), list (the shared ``JobFilter``), retrieve (with
its GPUs' utilization now, from Prometheus, and its idle-GPU state), cancel, exempt from
idle reclaim, events, rendered manifests and logs.

Every rule is the model's: ``Job.objects.visible_to`` decides what a caller sees (the
scoped base narrows it to a token's team), ``Job.objects.submit`` is the only way a job is
created, ``job.request_cancel`` the only way one is stopped. The writable fields, their
help and the list's row are the job spec's (``workloads/spec.py``).
"""

import hashlib
import json
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import exceptions, mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from cluster import ClusterError
from core.api_errors import Conflict, SlugRelatedField, Unavailable, error_response
from core.api_fields import DecimalInput, StrictFields
from core.api_filters import OrderingFilter
from core.api_input import CursorPagination
from core.ownership import job_selector
from core.reconcile import NoCluster, current_cluster
from quotas.models import GpuFlavor, IdlePolicy, PriorityClass
from tenants.auth import token_of
from tenants.scoping import TeamField, TeamScopedViewSet
from tenants.tokens import Scope
from workloads import spec
from workloads.kinds import by_name as kind_named

from .. import actions
from ..filters import JobFilter
from ..gpus import total_gpus
from ..manifests import render_job
from ..models import LIVE_NAME_TAKEN, MAX_CPU_PER_WORKER, IdleWatch, Job, JobEvent
from ..models.idempotency import KeyConflict
from ..outlook import feasibility
from ..queue import looks
from ..watch.logs import problem_of
from .eta import EtaSerializer, FeasibilitySerializer, PlaceSerializer, eta_of, eta_of_plan, feasibility_of, place_of
from .parts import (
    ExemptSerializer,
    GpuUtilizationSerializer,
    IdleSerializer,
    PreemptionContractSerializer,
    gpu_utilization,
)

IDEMPOTENCY_HEADER = "Idempotency-Key"
PLAN_ID = 0  # the id a dry run's objects are rendered with (as the submit form's preview)
MAX_LOG_LINES = 5000

TIMESTAMPS = ["created_at", "updated_at", "submitted_at", "admitted_at", "started_at", "finished_at"]
# Kueue's own words come first (docs/api.md): why it has not admitted the job, verbatim.
KUEUE_WORDS = ["kueue_reason", "kueue_message"]
STATUS_FIELDS = ["state", "reason", "message", *KUEUE_WORDS, *TIMESTAMPS]
# What a TrainJob's trainer last published of its progress (null for other kinds, and until it does).
PROGRESS_FIELDS = ["trainer_progress_percent", "trainer_remaining_seconds", "trainer_status_at"]

# A list page reads these columns, not model instances: a page of 50 jobs is 200 objects
# fewer. Related rows by the field that names them (``team__slug``), as the spec says.
LIST_ROW = ["id", *(field.column for field in spec.FIELDS), *STATUS_FIELDS, *PROGRESS_FIELDS, "submitter__username"]
_INSTANCE_COLUMNS = [name for name in LIST_ROW if "__" not in name]


def _row(job: Job) -> dict:
    """A job (a model instance) as a list row."""
    row = {name: getattr(job, name) for name in _INSTANCE_COLUMNS}
    for field, named_by in [*((f.name, f.named_by) for f in spec.RELATED_FIELDS), ("submitter", "username")]:
        related = getattr(job, field) if getattr(job, f"{field}_id") is not None else None
        row[f"{field}__{named_by}"] = getattr(related, named_by) if related is not None else None
    return row


def _when(value, zone) -> str | None:
    """DRF's ISO 8601, in the current time zone, 'Z' for UTC."""
    if value is None:
        return None
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def page_url(job_id: int | None) -> str | None:
    """The job's page, as emails and webhooks link it (`notifications.messages.absolute`);
    None for a job not stored (it has none)."""
    return None if job_id is None else f"{settings.PUBLIC_URL}{reverse('jobs:detail', args=[job_id])}"


def _help(name: str) -> str:
    return spec.BY_NAME[name].help


class JobSerializer(StrictFields, serializers.ModelSerializer):
    team = TeamField(help_text=_help("team"))
    flavor = SlugRelatedField(slug_field="name", queryset=GpuFlavor.objects.all(), help_text=_help("flavor"))
    priority = SlugRelatedField(slug_field="name", queryset=PriorityClass.objects.all(), required=False,
                                allow_null=True, help_text=_help("priority"))
    submitter = SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    total_gpus = serializers.IntegerField(read_only=True)
    runs_until_cancelled = serializers.CharField(read_only=True, help_text=(
        "What the job is once running, for kinds that run until cancelled (a server: \"serving\"); empty for "
        "work that ends by itself. gpuctl --wait stops waiting there."))
    command = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False,
                                    help_text=_help("command"))
    args = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False,
                                 help_text=_help("args"))
    env = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False, help_text=_help("env"))
    volumes = serializers.DictField(child=serializers.CharField(), required=False, help_text=_help("volumes"))
    cpu_per_worker = DecimalInput(min_value=Decimal("0.1"), max_value=Decimal(MAX_CPU_PER_WORKER), required=False,
                                  help_text=_help("cpu_per_worker"))
    web_url = serializers.SerializerMethodField(help_text=(
        "The job's page in the web UI (below PUBLIC_URL, as links in emails and webhooks)."))

    class Meta:
        model = Job
        fields = ["id", *spec.NAMES, "submitter", "total_gpus", "runs_until_cancelled", *STATUS_FIELDS,
                  *PROGRESS_FIELDS, "web_url"]
        read_only_fields = ["id", "submitter", "total_gpus", "runs_until_cancelled", *STATUS_FIELDS, *PROGRESS_FIELDS,
                            "web_url"]
        extra_kwargs = {
            **{field.name: {"help_text": field.help} for field in spec.FIELDS},
            "reason": {"help_text": "GPU Platform's reason, in the job lifecycle's words (a waiting job that can never "
                                    "start says so)."},
            "message": {"help_text": "GPU Platform's sentence: what it reads in the cluster's words, and its advice."},
            "kueue_reason": {"help_text": (
                "Kueue's own reason for not admitting the job yet, verbatim: its Workload's QuotaReserved=False "
                "reason (WaitingForQuota, ExceedsMaxQuota, NoMatchingFlavor, TopologyPlacementFailed, "
                "AdmissionGated, ... or Pending); empty when Kueue says none (admitted, not yet looked at, "
                "another scheduler).")},
            "kueue_message": {"help_text": "Kueue's own message with kueue_reason, verbatim; empty when it says none."},
            "trainer_progress_percent": {"help_text": (
                "A TrainJob's progress as its trainer last published it (Kubeflow Trainer's "
                "status.trainerStatus), 0-100; null: not published, or another kind.")},
            "trainer_remaining_seconds": {"help_text": (
                "The time its trainer expected still to run when it last said so (trainer_status_at); "
                "the ETAs of jobs queued behind it count from it.")},
            "trainer_status_at": {"help_text": "When the trainer last published its progress."},
        }
        # Job.full_clean (inside Job.objects.submit) checks the constraints, with the
        # model's own messages; DRF's copies of them would run a second query.
        validators = []

    def to_representation(self, job: Job | dict) -> dict:
        # What DRF's field-by-field walk gives, built directly from a list row (or a job read
        # as one): a page of 50 jobs costs a tenth of the time, and no serializer fields are
        # built to answer. The fields above still read requests and describe the schema;
        # tests/api/test_job_representation.py holds the outputs equal.
        row = job if isinstance(job, dict) else _row(job)
        zone = timezone.get_current_timezone()
        out = {"id": row["id"]}
        for field in spec.FIELDS:
            value = row[field.column]
            if field.shape == spec.LIST:
                value = list(value)
            elif field.shape == spec.MAP:
                value = dict(value)
            elif field.shape == spec.DECIMAL:
                value = self._declared_fields[field.name].to_representation(value)
            out[field.name] = value
        out.update({
            "submitter": row["submitter__username"],
            "total_gpus": total_gpus(row),
            "runs_until_cancelled": kind_named(row["kind"]).runs_until_cancelled,
            "state": row["state"], "reason": row["reason"], "message": row["message"],
            **{name: row[name] for name in KUEUE_WORDS},
            **{name: _when(row[name], zone) for name in TIMESTAMPS},
            "trainer_progress_percent": row["trainer_progress_percent"],
            "trainer_remaining_seconds": row["trainer_remaining_seconds"],
            "trainer_status_at": _when(row["trainer_status_at"], zone),
            "web_url": page_url(row["id"]),
        })
        return out

    def get_web_url(self, job) -> str | None:
        return page_url(job.pk)


class JobCreatedSerializer(JobSerializer):
    """A job just submitted, with the platform's estimate of whether it can run: a job that
    can never run is accepted (the quota may grow), but the submitter is told at once."""

    feasibility = serializers.SerializerMethodField()
    eta = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "feasibility", "eta"]
        read_only_fields = [*JobSerializer.Meta.read_only_fields, "feasibility", "eta"]

    def _user(self):
        request = self.context.get("request")
        return getattr(request, "user", None)

    @extend_schema_field(EtaSerializer(allow_null=True))
    def get_eta(self, job, verdict=None) -> dict | None:
        return eta_of(job, self._user(), verdict)

    @extend_schema_field(FeasibilitySerializer)
    def get_feasibility(self, job, verdict=None) -> dict:
        return feasibility_of(verdict or feasibility.assess(job))

    def to_representation(self, job: Job) -> dict:
        verdict = feasibility.assess(job)  # once, for both: the estimate starts from it
        return {**super().to_representation(job), "feasibility": self.get_feasibility(job, verdict),
                "eta": self.get_eta(job, verdict)}


class JobDetailSerializer(JobSerializer):
    """One job, with what its GPUs do now, its idle-GPU state and its preemptions."""

    gpu_utilization = serializers.SerializerMethodField()
    idle = serializers.SerializerMethodField()
    runtime_left_seconds = serializers.SerializerMethodField(
        help_text="Seconds before the max runtime stops the job, counted from its admission; null without a "
                  "limit, before admission and once it ended.")
    preemption = serializers.SerializerMethodField()
    queue = serializers.SerializerMethodField()
    eta = serializers.SerializerMethodField()

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "gpu_utilization", "idle", "runtime_left_seconds", "preemption", "queue",
                  "eta"]
        read_only_fields = [*JobSerializer.Meta.read_only_fields, "gpu_utilization", "idle", "runtime_left_seconds",
                            "preemption", "queue", "eta"]

    @extend_schema_field(EtaSerializer(allow_null=True))
    def get_eta(self, job) -> dict | None:
        return eta_of(job, self.context["request"].user)

    @extend_schema_field(PlaceSerializer(allow_null=True))
    def get_queue(self, job) -> dict | None:
        return place_of(job)

    @extend_schema_field(PreemptionContractSerializer)
    def get_preemption(self, job) -> dict:
        return PreemptionContractSerializer({
            "checkpoint_grace_seconds": job.checkpoint_grace_seconds,
            "minimum_runtime_seconds": job.minimum_runtime_seconds,
            "protected_until": job.protected_until() if job.is_protected_from_preemption() else None,
            "preemptions": job.preemptions.select_related("by_team", "by_job"),
        }).data

    @extend_schema_field(GpuUtilizationSerializer)
    def get_gpu_utilization(self, job) -> dict:
        return gpu_utilization(job)

    @extend_schema_field(IdleSerializer)
    def get_idle(self, job) -> dict:
        return IdleSerializer(IdleWatch.summary(job, IdlePolicy.objects.rules(job.team, job.flavor, cached=True))).data

    def get_runtime_left_seconds(self, job) -> int | None:
        left = job.runtime_left()
        return None if left is None else int(left.total_seconds())

    @looks.one_look()  # the place and the estimate read Kueue's pending list once
    def to_representation(self, job: Job) -> dict:
        return {**super().to_representation(job), "gpu_utilization": self.get_gpu_utilization(job),
                "idle": self.get_idle(job), "runtime_left_seconds": self.get_runtime_left_seconds(job),
                "preemption": self.get_preemption(job), "queue": self.get_queue(job), "eta": self.get_eta(job)}


class JobPlanSerializer(JobSerializer):
    """A job as a dry run would submit it: its fields, the defaults filled in; no id, no state."""

    class Meta(JobSerializer.Meta):
        fields = [*spec.NAMES, "total_gpus", "runs_until_cancelled"]
        read_only_fields = ["total_gpus", "runs_until_cancelled"]

    def to_representation(self, job: Job) -> dict:
        out = super().to_representation(job)
        return {name: out[name] for name in self.Meta.fields}


class DryRunSerializer(serializers.Serializer):
    job = JobPlanSerializer()
    feasibility = FeasibilitySerializer()
    eta = EtaSerializer(allow_null=True)
    objects = serializers.ListField(child=serializers.DictField(), help_text=(
        "The Kubernetes objects the platform would apply (the job's id in their names is 0)."))


class JobEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["created_at", "from_state", "to_state", "reason", "message"]
        read_only_fields = fields


class JobPagination(CursorPagination):
    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


def request_digest(data) -> str:
    """SHA-256 of the request body in a canonical form (key order does not matter)."""
    if hasattr(data, "lists"):
        data = {key: values if len(values) > 1 else values[0] for key, values in data.lists()}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


LogsSerializer = inline_serializer(
    "JobLogs",
    fields={
        "message": serializers.CharField(),
        "pods": inline_serializer(
            "PodLog", many=True, fields={"pod": serializers.CharField(), "log": serializers.CharField()}
        ),
    },
)


class JobViewSet(TeamScopedViewSet, mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin):
    """Jobs of your teams (of every team for quota managers; of its team for a token)."""

    rows = Job.objects.visible_to
    queryset = Job.objects.none()  # for the schema; rows and refine are the truth
    serializer_class = JobSerializer
    pagination_class = JobPagination
    filter_backends = [*TeamScopedViewSet.filter_backends, OrderingFilter]
    filterset_class = JobFilter
    ordering_fields = ["id", "created_at"]
    required_scopes = {"create": Scope.SUBMIT, "dry_run": Scope.SUBMIT, "cancel": Scope.CANCEL, "exempt_idle": Scope.CANCEL,
                       "stop": Scope.CANCEL, "start": Scope.SUBMIT}

    def get_serializer_class(self):
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    def refine(self, jobs):
        if self.action == "list":  # what a page shows, as rows: not every column of five tables
            return jobs.values(*LIST_ROW)
        return jobs.select_related("team", "flavor", "priority", "submitter", "idle_watch__exempted_by")

    # --- submit ------------------------------------------------------------------------
    @extend_schema(
        parameters=[OpenApiParameter(
            IDEMPOTENCY_HEADER, location=OpenApiParameter.HEADER, required=False,
            description="Retry-safe submission: the same key and body return the same job "
                        "(201 first, 200 after, each with the verdict and estimate as they stand); the same "
                        "key with another body is 409.",
        )],
        responses={201: JobCreatedSerializer, 200: JobCreatedSerializer,
                   409: error_response("Idempotency-Key reused with another body.")},
    )
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        key = request.headers.get(IDEMPOTENCY_HEADER, "").strip()
        if not key:
            return self._created(self._submit(serializer.validated_data))
        if len(key) > 255 or "\x00" in key:
            raise serializers.ValidationError({IDEMPOTENCY_HEADER: ["At most 255 characters, no null characters."]})
        data = dict(serializer.validated_data)
        try:
            job_id, created = actions.submit_once(
                key=key, digest=request_digest(request.data), token=token_of(request),
                team=data.pop("team"), submitter=request.user, **data)
        except KeyConflict as err:
            raise Conflict(str(err)) from err
        except IntegrityError as err:
            raise Conflict(LIVE_NAME_TAKEN) from err  # a racing same-name submit
        if created is not None:
            return self._created(created)
        job = self.get_queryset().filter(pk=job_id).first()
        if job is None:
            raise NotFound("The job this Idempotency-Key created is gone.")
        # The replay says what the first answer said, worked out again: still true now.
        return Response(JobCreatedSerializer(job, context=self.get_serializer_context()).data,
                        status=status.HTTP_200_OK)

    def _submit(self, data) -> Job:
        data = dict(data)
        team = data.pop("team")
        try:
            return actions.submit(team=team, submitter=self.request.user, **data)
        except IntegrityError as err:
            # Two submissions of the same name raced past full_clean.
            raise Conflict(LIVE_NAME_TAKEN) from err

    def _created(self, job: Job) -> Response:
        # The job as submitted: its team, flavor, priority and submitter are the objects
        # the request named, so nothing is read back.
        headers = {"Location": f"{self.request.build_absolute_uri().rstrip('/')}/{job.pk}"}
        data = JobCreatedSerializer(job, context=self.get_serializer_context()).data
        return Response(data, status=status.HTTP_201_CREATED, headers=headers)

    @extend_schema(request=JobSerializer, responses={
        200: DryRunSerializer, 403: error_response("Only the team's owners and members can submit jobs.")})
    @action(detail=False, methods=["post"], url_path="dry-run", pagination_class=None, filter_backends=[])
    def dry_run(self, request):
        """Check a submission as POST /jobs does and show what it would apply; nothing is created."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        job = Job.objects.checked(team=data.pop("team"), submitter=request.user, **data)
        job.pk = PLAN_ID
        plan = {"job": JobPlanSerializer(job).data, "objects": render_job(job)}
        job.pk = None  # not submitted: for the verdict, a new job behind every one waiting
        verdict = feasibility.assess(job)
        return Response({**plan, "feasibility": feasibility_of(verdict), "eta": eta_of_plan(job, verdict)})

    # --- actions -----------------------------------------------------------------------
    @extend_schema(request=None, responses={202: JobSerializer, 409: error_response("The job already ended or is being cancelled.")})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Stop the job: it moves to cancelling and the platform removes its objects."""
        job = self.get_object()
        if not job.is_cancellable:
            raise Conflict(f"The job is already {job.state}.")
        actions.cancel(job, request.user)
        job.refresh_from_db()
        return Response(self.get_serializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={
        202: JobSerializer, 403: error_response("Only the team's owners and members can stop a notebook."),
        409: error_response("Not a notebook, or not running or waiting.")})
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        """Stop a notebook: its GPUs go back, its volumes and its objects stay (docs/notebooks.md)."""
        job = self.get_object()
        if not job.is_stoppable:
            already = job.is_notebook and job.state == job.State.STOPPED
            raise Conflict("The notebook is already stopped." if already
                           else "Only a notebook that runs or waits can be stopped.")
        actions.stop(job, request.user)
        job.refresh_from_db()
        return Response(self.get_serializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={
        202: JobSerializer, 400: error_response("It does not fit the team's own quota now (on gpus_per_worker)."),
        403: error_response("Only the team's owners and members can start a notebook."),
        409: error_response("Not a stopped notebook.")})
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        """Start a stopped notebook again, within the team's own quota, with the same volumes."""
        job = self.get_object()
        if not (job.is_notebook and job.state == job.State.STOPPED):
            raise Conflict("Only a stopped notebook can be started.")
        try:
            actions.start(job, request.user)
        except ValidationError as err:
            raise serializers.ValidationError(err.message_dict) from err
        job.refresh_from_db()
        return Response(self.get_serializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=ExemptSerializer, responses={
        200: JobDetailSerializer, 403: error_response("Only the team's owners (where the policy allows it) and "
                                                     "quota managers can exempt a job.")})
    @action(detail=True, methods=["post"], url_path="exempt-idle")
    def exempt_idle(self, request, pk=None):
        """Exempt the job from idle-GPU reclaim, with a reason (audited; a warning is withdrawn)."""
        job = self.get_object()
        body = ExemptSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            IdleWatch.exempt(job, request.user, body.validated_data["reason"],
                             IdlePolicy.objects.rules(job.team, job.flavor))
        except PermissionDenied as err:
            raise exceptions.PermissionDenied(str(err)) from err
        except ValidationError as err:
            raise serializers.ValidationError(err.message_dict) from err
        job = self.get_queryset().select_related("idle_watch").get(pk=job.pk)
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data)

    @extend_schema(responses={200: JobEventSerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def events(self, request, pk=None):
        """Every state change of the job, oldest first."""
        return Response(JobEventSerializer(self.get_object().events.all(), many=True).data)

    @extend_schema(responses={200: OpenApiResponse(
        inline_serializer("Manifests", fields={"objects": serializers.ListField(child=serializers.DictField())}),
        description="The Kubernetes objects the platform applies for this job.",
    )})
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def manifests(self, request, pk=None):
        """The objects the platform renders for this job, exactly as it applies them."""
        return Response({"objects": render_job(self.get_object())})

    @extend_schema(
        parameters=[OpenApiParameter("tail", {"type": "integer", "minimum": 1, "maximum": MAX_LOG_LINES},
                                     description=f"Last lines per pod (1-{MAX_LOG_LINES}, default 200).")],
        responses={200: LogsSerializer, 503: error_response("No cluster configured, or it cannot be reached.")},
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def logs(self, request, pk=None):
        """The last lines of each of the job's pods."""
        job = self.get_object()
        tail = request.query_params.get("tail", "200")
        if not (tail.isascii() and tail.isdigit() and 1 <= int(tail) <= MAX_LOG_LINES):
            raise serializers.ValidationError({"tail": [f"A whole number of lines from 1 to {MAX_LOG_LINES}."]})
        tail = int(tail)
        try:
            cluster = current_cluster()
        except NoCluster as err:
            raise Unavailable("Logs are unavailable: this platform has no cluster configured.",
                              code="logs_unavailable") from err
        namespace = job.team.namespace_name
        try:
            pods = cluster.list("v1", "Pod", namespace=namespace, label_selector=job_selector(job.pk))
            logs = [
                {"pod": pod["metadata"]["name"],
                 "log": cluster.pod_logs(namespace, pod["metadata"]["name"], tail_lines=tail)}
                for pod in sorted(pods, key=lambda p: p["metadata"]["name"])
            ]
        except ClusterError as err:
            # In words, as on the job page (`jobs.watch.logs`), never the transport's error text.
            raise Unavailable(f"Logs are unavailable: {problem_of(err)}", code="logs_unavailable") from err
        message = "" if logs else "The job has no pods (not started yet, or already removed)."
        return Response({"message": message, "pods": logs})
