"""`Cluster`: the real door, over the official client's `DynamicClient`.

Why dynamic: the platform writes built-in kinds and Kueue / Volcano custom resources as
plain dicts from the renderers, so one code path serves both, found by discovery (done
once per process and kept in memory, never in a shared file that a second process could
read half-written).

Every call translates client exceptions into `cluster.errors`; nothing here retries
(the Celery tasks do, with backoff) except a watch, which resumes by design.
"""

from __future__ import annotations

import contextlib
import copy
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.discovery import LazyDiscoverer
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from .cache import WatchCache
from .errors import (
    ClusterError,
    NotFound,
    PermanentError,
    TransientError,
    UnknownKind,
    classify,
)
from .fields import Ownership, for_existing
from .objects import (
    Action,
    ApplyResult,
    ObjectRef,
    Snapshot,
    apply_order,
    create_only,
    is_unchanged,
)
from .sync import SnapshotAndPrune
from .transport import WatchResponse, request_verb
from .watch import Gone, WatchStream

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
LIST_PAGE_SIZE = 500
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 60


class _MemoryDiscoverer(LazyDiscoverer):
    """Discovery cached for this process only (see the module docstring)."""

    def _write_cache(self):
        pass


@contextlib.contextmanager
def _translated():
    try:
        yield
    except ClusterError:
        raise
    except Exception as exc:
        error = classify(exc)
        if error is None:
            raise
        raise error from exc


def _raw(_client, data):
    return data


class Cluster(SnapshotAndPrune):
    """One API server, one field manager. Safe to share between threads."""

    def __init__(
        self,
        *,
        kubeconfig: str | Path | None = None,
        in_cluster: bool = False,
        context: str | None = None,
        field_manager: str = "gpuplatform",
        configuration: k8s.Configuration | None = None,
        field_validation: str = "Strict",
        watch_cache: bool = False,
    ):
        if configuration is None:
            configuration = k8s.Configuration()
            if in_cluster:
                k8s_config.load_incluster_config(client_configuration=configuration)
            else:
                k8s_config.load_kube_config(
                    config_file=str(kubeconfig) if kubeconfig else None,
                    context=context,
                    client_configuration=configuration,
                )
        else:
            configuration = copy.deepcopy(configuration)  # the caller's stays as it was
        # One attempt per call: retrying is the caller's decision, with its own backoff.
        configuration.retries = False
        # Reconciles run in parallel threads over one client: keep a connection per thread.
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, 32)
        self.field_manager = field_manager
        self.field_validation = field_validation
        self.requests: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        self._api = k8s.ApiClient(configuration)
        self._count_requests(self._api)
        self._dyn: DynamicClient | None = None
        self._resources: dict[tuple[str, str], object] = {}
        self._discovery_lock = threading.Lock()
        # Reads for reconciles from a watch cache of what we own (`cluster.cache`).
        self.cache = WatchCache(self) if watch_cache else None

    # --- plumbing ---------------------------------------------------------------------
    def _count_requests(self, api: k8s.ApiClient) -> None:
        call_api = api.call_api

        def counted(method, url, *args, **kwargs):
            verb = request_verb(method, url)
            with self._count_lock:
                self.requests[verb] += 1
            return call_api(method, url, *args, **kwargs)

        api.call_api = counted

    def reset_counts(self) -> None:
        with self._count_lock:
            self.requests.clear()

    @property
    def writes(self) -> int:
        return sum(self.requests[v] for v in ("POST", "PUT", "PATCH", "DELETE"))

    def _dynamic(self) -> DynamicClient:
        # Built on first use, so a platform process starts even while the API server is down.
        with self._discovery_lock:
            if self._dyn is None:
                cache = Path(tempfile.gettempdir()) / (
                    f"gpuplatform-discovery-{uuid.uuid4().hex}.json"  # never written
                )
                with _translated():
                    self._dyn = DynamicClient(self._api, cache_file=str(cache),
                                              discoverer=_MemoryDiscoverer)
            return self._dyn

    def _resource(self, api_version: str, kind: str):
        key = (api_version, kind)
        resource = self._resources.get(key)
        if resource is not None:
            return resource
        dyn = self._dynamic()
        group, _, version = api_version.rpartition("/")
        with self._discovery_lock, _translated():
            try:
                if group:
                    resource = dyn.resources.get(
                        prefix="apis", group=group, api_version=version, kind=kind
                    )
                else:
                    resource = dyn.resources.get(prefix="api", api_version=version, kind=kind)
            except ResourceNotFoundError as exc:
                raise UnknownKind(
                    f"the cluster does not serve {kind} in {api_version} (is its CRD installed?)",
                    status=404,
                    reason="NotFound",
                ) from exc
            self._resources[key] = resource
        return resource

    def _request(self, method: str, path: str, **params):
        dyn = self._dynamic()
        params.setdefault("serializer", _raw)
        params.setdefault("_request_timeout", (CONNECT_TIMEOUT, READ_TIMEOUT))
        try:
            with _translated():
                return dyn.request(method, path, **params)
        except PermanentError as exc:
            if exc.status == 404 and not isinstance(exc, NotFound):
                # The path itself is gone (a CRD removed or upgraded under us): discover
                # afresh next time instead of failing on a stale cache forever.
                self._forget_discovery()
            raise

    def _forget_discovery(self) -> None:
        with self._discovery_lock:
            self._resources.clear()
            self._dyn = None

    def _path(self, api_version, kind, name=None, namespace=None) -> str:
        resource = self._resource(api_version, kind)
        if resource.namespaced and name and not namespace:
            raise ValueError(f"{kind} {name!r} is namespaced; give its namespace")
        return resource.path(name=name, namespace=namespace if resource.namespaced else None)

    # --- reading ----------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        """The live object; raises `NotFound` when it does not exist."""
        return self._request("get", self._path(api_version, kind, name, namespace))

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict]:
        """Objects of a kind, in one namespace or (namespace=None) all of them."""
        return self._list(api_version, kind, namespace, label_selector, field_selector=field_selector)[0]

    def _list(self, api_version, kind, namespace, label_selector, transform=None, *,
              field_selector=None) -> tuple[list[dict], str]:
        """All pages; `transform` (a watch's, see `cluster.watch`) is applied to each item
        as its page arrives, so only one page of full objects is held at a time."""
        path = self._path(api_version, kind, namespace=namespace)
        items, token = [], None
        while True:
            page = self._request(
                "get", path, label_selector=label_selector, field_selector=field_selector,
                limit=LIST_PAGE_SIZE, _continue=token,
            )
            for item in page.get("items") or ():
                # The API server leaves these out of list items of built-in kinds.
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                items.append(item if transform is None else transform(item))
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items, (page.get("metadata") or {}).get("resourceVersion", "")

    def pod_logs(
        self, namespace: str, name: str, container: str | None = None, tail_lines: int = 200
    ) -> str:
        query = [("tailLines", tail_lines)]
        if container:
            query.append(("container", container))
        response = self._request(
            "get",
            self._path("v1", "Pod", name, namespace) + "/log",
            query_params=query,
            header_params={"Accept": "text/plain, */*"},
            serialize=False,
        )
        return response.data.decode("utf-8", errors="replace")

    # --- writing ----------------------------------------------------------------------
    def apply(
        self, objects: list[dict], *, snapshot: Snapshot | None = None, rules: Ownership | None = None,
        before_write: Callable[[], None] | None = None,
    ) -> list[ApplyResult]:
        """Server-side apply each object, dependencies first; skip those already as desired.

        Skipping needs the live object, never a write: from `snapshot` when it covers the
        kind, else one GET. A second reconcile of an unchanged database costs reads only.
        A watch-cache miss on a kind with field rules is applied as a create only and read
        only if it exists after all (`_create_or_decide`).
        This is not check-then-create: whatever was read, the PATCH is an idempotent apply.
        `rules` say which fields of an existing object belong to others (`cluster.fields`).
        `before_write()` runs before every PATCH (never for an object already as desired): a
        caller may lock and re-check there that the write is still wanted, and raise if not.
        """
        snapshot = self._lookup(objects, snapshot)
        return [self._apply_one(obj, snapshot, rules or {}, before_write) for obj in apply_order(objects)]

    def _apply_one(self, desired: dict, snapshot: Snapshot | None, rules: Ownership, before_write) -> ApplyResult:
        ref = ObjectRef.of(desired)
        path = self._path(ref.api_version, ref.kind, ref.name, ref.namespace)
        kind_rules = rules.get((ref.group, ref.kind))
        if self.cache is not None and kind_rules is not None:
            self.cache.rules[(ref.group, ref.kind)] = kind_rules
        from_cache = snapshot is not None and not snapshot.is_complete(ref)
        if snapshot is None or not snapshot.covers(ref):
            live = self._read(path)
        elif snapshot.is_unknown(ref, kind_rules):
            return self._create_or_decide(ref, path, desired, kind_rules, before_write)
        else:
            live = snapshot.get(ref)
        try:
            return self._apply_onto(ref, path, desired, live, kind_rules, before_write)
        except TransientError as exc:
            if exc.status != 409 or not from_cache:
                raise  # a conflict with a fresh read is the task's to retry, with backoff
            # The watch cache was behind the cluster: read the object and decide once more.
            return self._apply_onto(ref, path, desired, self._read(path), kind_rules, before_write)

    def _create_or_decide(self, ref: ObjectRef, path: str, desired: dict, kind_rules, before_write) -> ApplyResult:
        """A cache miss on a kind with field rules (a new job's workload, most likely):
        create it if it is absent, in one request; if it exists after all (409), read it
        and decide as for any existing object, so no controller's field is taken back."""
        try:
            return self._apply_onto(ref, path, create_only(desired), None, kind_rules, before_write)
        except TransientError as exc:
            if exc.status != 409:
                raise
        return self._apply_onto(ref, path, desired, self._read(path), kind_rules, before_write)

    def _read(self, path: str) -> dict | None:
        try:
            return self._request("get", path)
        except NotFound:
            return None

    def _apply_onto(self, ref: ObjectRef, path: str, desired: dict, live: dict | None, kind_rules,
                    before_write=None) -> ApplyResult:
        drift = ()
        if live is not None:
            desired, drift = for_existing(desired, live, kind_rules)
            if is_unchanged(desired, live, self.field_manager):
                return ApplyResult(ref, Action.UNCHANGED, live, drift)
        if before_write is not None:
            before_write()
        applied = self._request(
            "patch",
            path,
            body=desired,
            content_type=APPLY_CONTENT_TYPE,
            field_manager=self.field_manager,
            force_conflicts=True,
            query_params=[("fieldValidation", self.field_validation)],
        )
        if self.cache is not None:
            self.cache.record(applied)
        return ApplyResult(ref, Action.CREATED if live is None else Action.CHANGED, applied, drift)

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation_policy: str = "Background",
        preconditions: dict | None = None,
    ) -> bool:
        """Delete one object; False when it was already gone. `preconditions` (uid,
        resourceVersion) make a changed object answer 409 Conflict instead."""
        # With a body the API server reads every delete option from it and ignores the query
        # (a Job would default to orphaning its pods), so the policy goes in the body too.
        body = {"preconditions": preconditions, "propagationPolicy": propagation_policy} if preconditions else None
        try:
            self._request(
                "delete",
                self._path(api_version, kind, name, namespace),
                body=body,
                propagation_policy=propagation_policy,
            )
        except NotFound:
            return False
        if self.cache is not None:
            self.cache.forget(ObjectRef(api_version, kind, namespace, name))
        return True

    # --- watching ---------------------------------------------------------------------
    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout: float | None = None,
        on_listed=None,
        on_watching=None,
        transform=None,
    ) -> WatchStream:
        """Events for a kind as ``(type, object)``; see `cluster.watch.WatchStream`.

        Without `resource_version` it starts with a LIST (ADDED for each object) and
        watches from there. `timeout` (seconds) ends the iteration; so does `stop()`.
        `transform(obj) -> obj` is applied to every listed item (page by page) and every
        event's object before the stream keeps it: a cache keeps only what it reads.
        """
        path = self._path(api_version, kind, namespace=namespace)

        def lister():
            return self._list(api_version, kind, namespace, label_selector, transform, field_selector=field_selector)

        def opener(version, seconds):
            try:
                response = self._request(
                    "get",
                    path,
                    watch=True,
                    resource_version=version,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    timeout_seconds=seconds,
                    allow_watch_bookmarks=True,
                    serialize=False,
                    _request_timeout=(CONNECT_TIMEOUT, seconds + 30),
                )
            except TransientError as exc:
                if exc.status == 410:
                    raise Gone(exc.message) from exc
                raise
            return WatchResponse(response)

        return WatchStream(
            lister=lister, opener=opener, resource_version=resource_version, timeout=timeout,
            on_listed=on_listed, on_watching=on_watching, transform=transform,
        )

    def close(self) -> None:
        if self.cache is not None:
            self.cache.stop()
        self._api.close()
