"""`Cluster`: the real door, over the official client's `DynamicClient`.

Why dynamic: the platform writes built-in kinds and Kueue / Volcano custom resources as
plain dicts from the renderers, so one code path serves both, found by discovery (done
once per process and kept in memory, never in a shared file that a second process could
read half-written).

This module is the HTTP transport only: what to send and whether to send it is decided
in `cluster.door`, which the in-memory `FakeCluster` shares. Every call translates client
exceptions into `cluster.errors`; nothing here retries (the Celery tasks do, with
backoff) except a watch, which resumes by design.
"""

from __future__ import annotations

import contextlib
import copy
import tempfile
import threading
import uuid
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.discovery import LazyDiscoverer
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from .cache import WatchCache
from .door import Door
from .errors import (
    ClusterError,
    NotFound,
    PermanentError,
    TransientError,
    UnknownKind,
    classify,
)
from .objects import ObjectRef
from .transport import WatchResponse, request_verb
from .watch import Gone

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
JSON_PATCH_CONTENT_TYPE = "application/json-patch+json"
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


class Cluster(Door):
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
        # Requests the API server refused with 403, as "VERB path", for the process's life
        # (`reset_counts` leaves them): a missing RBAC verb shows here whoever asked.
        self.forbidden: Counter[str] = Counter()
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
            try:
                return call_api(method, url, *args, **kwargs)
            except Exception as exc:
                if getattr(exc, "status", None) == 403:
                    with self._count_lock:
                        self.forbidden[f"{verb} {urlsplit(url).path}"] += 1
                raise

        api.call_api = counted

    def reset_counts(self) -> None:
        with self._count_lock:
            self.requests.clear()

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

    # --- the transport (decisions: `cluster.door`) ----------------------------------------
    def _served(self, api_version: str, kind: str) -> None:
        self._resource(api_version, kind)

    def _ref_path(self, ref: ObjectRef) -> str:
        return self._path(ref.api_version, ref.kind, ref.name, ref.namespace)

    def _fetch(self, ref: ObjectRef) -> dict:
        return self._request("get", self._ref_path(ref))

    def _list_pages(self, api_version, kind, namespace, label_selector, field_selector, transform
                    ) -> tuple[list[dict], str]:
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

    def _send_apply(self, ref: ObjectRef, body: dict) -> dict:
        return self._request(
            "patch",
            self._ref_path(ref),
            body=body,
            content_type=APPLY_CONTENT_TYPE,
            field_manager=self.field_manager,
            force_conflicts=True,
            query_params=[("fieldValidation", self.field_validation)],
        )

    def _send_patch(self, ref: ObjectRef, operations: list[dict]) -> dict:
        return self._request("patch", self._ref_path(ref), body=operations, content_type=JSON_PATCH_CONTENT_TYPE,
                             field_manager=self.field_manager)

    def _send_create(self, ref: ObjectRef, body: dict) -> dict:
        return self._request("post", self._path(ref.api_version, ref.kind, namespace=ref.namespace), body=body)

    def _send_replace(self, ref: ObjectRef, body: dict) -> dict:
        return self._request("put", self._ref_path(ref), body=body)

    def _send_delete(self, ref: ObjectRef, propagation_policy: str, preconditions: dict | None) -> None:
        # With a body the API server reads every delete option from it and ignores the query
        # (a Job would default to orphaning its pods), so the policy goes in the body too.
        body = {"preconditions": preconditions, "propagationPolicy": propagation_policy} if preconditions else None
        self._request("delete", self._ref_path(ref), body=body, propagation_policy=propagation_policy)

    def _open_watch(self, api_version, kind, namespace, label_selector, field_selector, version, seconds,
                    _stream) -> WatchResponse:
        try:
            response = self._request(
                "get",
                self._path(api_version, kind, namespace=namespace),
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

    # --- beyond objects ---------------------------------------------------------------
    def pod_logs(
        self, namespace: str, name: str, container: str | None = None, tail_lines: int | None = 200, *,
        previous: bool = False, limit_bytes: int | None = None,
    ) -> str:
        """The container's log: its last ``tail_lines`` lines (all with None), of its previous run
        with ``previous``, at most ``limit_bytes`` bytes."""
        query = [] if tail_lines is None else [("tailLines", tail_lines)]
        if container:
            query.append(("container", container))
        if previous:
            query.append(("previous", "true"))
        if limit_bytes:
            query.append(("limitBytes", limit_bytes))
        response = self._request(
            "get",
            self._path("v1", "Pod", name, namespace) + "/log",
            query_params=query,
            header_params={"Accept": "text/plain, */*"},
            serialize=False,
        )
        return response.data.decode("utf-8", errors="replace")

    def get_path(self, path: str, **query) -> dict:
        """What the API server answers a GET of ``path`` (a subresource, or an aggregated API's
        resource such as Kueue's pending workloads), as a dict; `NotFound` when nothing is there."""
        return self._request("get", path, query_params=list(query.items()))

    def close(self) -> None:
        if self.cache is not None:
            self.cache.stop()
        self._api.close()
