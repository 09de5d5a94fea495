"""Thin Kubernetes API helpers over kubernetes-asyncio's ApiClient.call_api.

Everything raybus reads or writes is handled as plain JSON dicts (the watcher republishes them,
the executor receives manifests from decision code), so there is no typed-model round trip: one
generic path builder, one resource map, and the handful of verbs controller-runtime's client uses
(get/list/watch/create/delete/merge-patch/update-status).

Rate limiting mirrors client-go's token bucket (KubeRay's defaults: --kube-api-qps 100, burst 200),
implemented with aiolimiter: `burst` tokens refilled at `qps` per second.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import aiohttp
from aiolimiter import AsyncLimiter
from kubernetes_asyncio import client as kclient
from kubernetes_asyncio import config as kconfig
from kubernetes_asyncio.client.exceptions import ApiException
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic_core import PydanticSerializationError, from_json, to_jsonable_python
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from raybus.adapters.priority_limiter import PriorityLimiter
from raybus.observability import restclient

Json = dict[str, Any]
_OBJ_TYPES = {200: "object", 201: "object", 202: "object"}
_AUTH = ["BearerToken"]
# Connection-level failures (API server restarting, connection reset mid-watch): code 0, transient.
_CONN_ERRORS = (OSError, TimeoutError, aiohttp.ClientError)
tracer = trace.get_tracer("raybus.kube")


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, *, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        if subresource is not None:
            base += f"/{subresource}"
        return base


def _r(api_version: str, plural: str, kind: str, *, namespaced: bool = True) -> Resource:
    group, _, version = api_version.rpartition("/")
    return Resource(group=group, version=version, plural=plural, kind=kind, namespaced=namespaced)


# Every kind raybus touches: reconcilers create/delete the built-ins, the watcher watches them.
RESOURCES: dict[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r for r in (
        _r("ray.io/v1", "rayclusters", "RayCluster"),
        _r("ray.io/v1", "rayjobs", "RayJob"),
        _r("ray.io/v1", "rayservices", "RayService"),
        _r("v1", "pods", "Pod"),
        _r("v1", "services", "Service"),
        _r("v1", "serviceaccounts", "ServiceAccount"),
        _r("v1", "events", "Event"),
        _r("events.k8s.io/v1", "events", "Event"),
        _r("v1", "secrets", "Secret"),
        _r("v1", "configmaps", "ConfigMap"),
        _r("v1", "namespaces", "Namespace", namespaced=False),
        _r("batch/v1", "jobs", "Job"),
        _r("rbac.authorization.k8s.io/v1", "roles", "Role"),
        _r("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
        _r("networking.k8s.io/v1", "ingresses", "Ingress"),
        _r("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy"),
        # Batch schedulers' gang PodGroups (KubeRay --batch-scheduler volcano / scheduler-plugins).
        _r("scheduling.volcano.sh/v1beta1", "podgroups", "PodGroup"),
        _r("scheduling.x-k8s.io/v1alpha1", "podgroups", "PodGroup"),
        _r("discovery.k8s.io/v1", "endpointslices", "EndpointSlice"),
        _r("gateway.networking.k8s.io/v1", "gateways", "Gateway"),
        _r("gateway.networking.k8s.io/v1", "httproutes", "HTTPRoute"),
    )
}


class UnknownResource(KeyError):
    pass


def resource_for(api_version: str, kind: str) -> Resource:
    try:
        return RESOURCES[(api_version, kind)]
    except KeyError:
        raise UnknownResource(f"{api_version} {kind}") from None


class KubeError(Exception):
    """An API error reduced to what callers branch on: HTTP code, Status.reason, message.

    Deliberately not ApiException's str(): that dumps response headers and body, and a body may
    echo request content (never log Secret values or tokens)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message

    @classmethod
    def from_status(cls, code: int, body: object) -> KubeError:
        reason, message = "", ""
        if isinstance(body, (str, bytes)):
            try:
                body = json.loads(body)
            except ValueError:
                body = None
        if isinstance(body, dict):
            reason = str(body.get("reason") or "")
            message = str(body.get("message") or "")[:500]
            code = int(body.get("code") or code)
        return cls(code, reason or _default_reason(code), message)

    @classmethod
    def from_api_exception(cls, exc: ApiException) -> KubeError:
        return cls.from_status(int(exc.status or 0), exc.body)

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"

    @property
    def conflict(self) -> bool:
        return self.code == 409 and self.reason != "AlreadyExists"

    @property
    def gone(self) -> bool:
        """410: the resourceVersion is too old (compacted); client-go's reflector relists."""
        return self.code == 410

    @property
    def transient(self) -> bool:
        """Worth retrying unchanged: throttling, server errors, timeouts, connection trouble (0)."""
        return self.code in (0, 408, 429) or self.code >= 500


def _default_reason(code: int) -> str:
    return {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
            409: "Conflict", 410: "Expired", 422: "Invalid", 429: "TooManyRequests",
            500: "InternalError", 503: "ServiceUnavailable", 0: "ConnectionError"}.get(code, "Unknown")


async def new_api_client(kubeconfig: str | None) -> kclient.ApiClient:
    """A kubeconfig file when given (local dev, tests), else the pod's service account."""
    if kubeconfig:
        api: kclient.ApiClient = await kconfig.new_client_from_config(config_file=kubeconfig)
    else:
        configuration = kclient.Configuration()
        kconfig.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        api = kclient.ApiClient(configuration)
    no_env_lookups(api)
    return api


def no_env_lookups(api: kclient.ApiClient) -> None:
    """kubernetes-asyncio opens its aiohttp session with trust_env=True, so every request reads
    ~/.netrc (in a thread) and the proxy variables again: most of the command-executor's CPU at
    1,000 RayClusters. The kubeconfig / in-cluster config already says how to reach the API
    server; a proxy given in the kubeconfig (proxy-url) is still honoured by the client."""
    session = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env"):
        session._trust_env = False


def rate_limiter(qps: float, burst: int) -> AsyncLimiter:
    """client-go's token bucket: `burst` tokens, refilled at `qps`/s (KubeRay: 100 QPS, 200 burst)."""
    return AsyncLimiter(max_rate=burst, time_period=burst / qps)


@dataclass(frozen=True)
class WatchEvent:
    type: Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    object: Json


MAX_RETRIES = 10  # client-go's rest client default (Request.maxRetries)
MAX_RETRY_AFTER_S = 30.0


def retry_after(code: int | None, headers: Any) -> float | None:
    """client-go's checkWait: seconds to wait before sending a request again, for a 429 or a 5xx
    that carries an integer Retry-After header; None: not retried."""
    if code is None or not (code == 429 or code >= 500) or headers is None:
        return None
    value = headers.get("Retry-After")
    try:
        seconds = int(str(value))
    except ValueError:
        return None
    return float(min(max(seconds, 0), MAX_RETRY_AFTER_S))


class _RetryAfter(Exception):
    def __init__(self, seconds: float, error: KubeError) -> None:
        super().__init__(error)
        self.seconds, self.error = seconds, error


def _retry_after(state: RetryCallState) -> float:
    """Sleep what the API server's Retry-After said."""
    exc = state.outcome.exception() if state.outcome is not None else None
    return exc.seconds if isinstance(exc, _RetryAfter) else 0.0


def _json_bodies_in_c(api: kclient.ApiClient) -> None:
    """kubernetes-asyncio's sanitize_for_serialization copies a request body node by node in
    Python before json.dumps (150 us for a Pod, a tenth of the command-executor's CPU).
    Our bodies are JSON dicts (decoded from the bus or built as such): pydantic-core's
    to_jsonable_python makes the same JSON value in C. What it cannot encode (an OpenAPI model
    object) takes the library's path, as does everything but a dict."""
    generic = getattr(api, "sanitize_for_serialization", None)
    if generic is None or getattr(generic, "raybus_json_in_c", False):
        return

    def sanitize(obj: object) -> object:
        if isinstance(obj, dict):
            try:
                return to_jsonable_python(obj)
            except PydanticSerializationError:
                pass
        return generic(obj)

    sanitize.raybus_json_in_c = True  # type: ignore[attr-defined]
    setattr(api, "sanitize_for_serialization", sanitize)  # noqa: B010  (an instance, not the class)


# The Accept header of client-go's metadata client: objects as meta.k8s.io/v1 PartialObjectMetadata
# (metadata only), lists as PartialObjectMetadataList, watch events likewise.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"  # lists: 406 otherwise


def _own_kind(obj: Json, res: Resource, metadata_only: bool) -> None:
    """An object as its resource's kind: list items omit apiVersion/kind, and a metadata-only
    answer names PartialObjectMetadata instead."""
    if metadata_only:
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
    else:
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
def _trace_requests(api: kclient.ApiClient, host: str) -> None:
    """client-go's size and DNS metrics from the session's own events (observability/restclient):
    kubernetes-asyncio makes its aiohttp session itself, so the trace config joins it after."""
    session = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    configs = getattr(session, "_trace_configs", None)
    if isinstance(configs, list) and not any(getattr(c, "raybus_host", None) for c in configs):
        config = restclient.trace_config(host)
        config.raybus_host = host  # type: ignore[attr-defined]
        configs.append(config)


class KubeClient:
    """Generic JSON verbs; every call but a watch's streaming body goes through the limiter."""

    def __init__(self, api: kclient.ApiClient, *, limiter: AsyncLimiter | PriorityLimiter | None = None,
                 request_timeout_s: float = 30.0) -> None:
        _json_bodies_in_c(api)
        self.api = api
        self._limiter = limiter
        self._timeout = request_timeout_s
        self._host = restclient.host_of(str(getattr(getattr(api, "configuration", None), "host", "") or ""))
        _trace_requests(api, self._host)

    async def _throttle(self, method: str) -> None:
        if self._limiter is not None:
            started = time.monotonic()
            await self._limiter.acquire()
            restclient.observe_rate_limiter(method=method, host=self._host,
                                            seconds=time.monotonic() - started)

    async def close(self) -> None:
        if isinstance(self._limiter, PriorityLimiter):
            await self._limiter.close()
        await self.api.close()

    async def _call(self, method: str, path: str, *, query: list[tuple[str, str]] | None = None,
                    body: object = None, content_type: str = "application/json",
                    accept: str = "application/json") -> Json:
        # client-go's rest client (request.go, checkWait): a 429, or a 5xx with Retry-After, was not
        # processed; it sleeps Retry-After and sends the request again, up to maxRetries (10) times,
        # each through the rate limiter. Without it an API server throttling for a second turned
        # into a failed batch and its redelivery backoff. The first attempt is made outside
        # tenacity: building its retry loop for every call was 5% of the command-executor's CPU,
        # and almost every call succeeds or fails for good the first time.
        try:
            return await self._call_once(method, path, query=query, body=body, content_type=content_type,
                                         accept=accept)
        except _RetryAfter as first:
            restclient.observe_retry(method=method, host=self._host, code=first.error.code)
            await asyncio.sleep(first.seconds)
        try:
            def retried(state: RetryCallState) -> None:
                exc = state.outcome.exception() if state.outcome else None
                if isinstance(exc, _RetryAfter):
                    restclient.observe_retry(method=method, host=self._host, code=exc.error.code)
            async for attempt in AsyncRetrying(stop=stop_after_attempt(MAX_RETRIES), wait=_retry_after,
                                               retry=retry_if_exception_type(_RetryAfter),
                                               before_sleep=retried, reraise=True):
                with attempt:
                    return await self._call_once(method, path, query=query, body=body,
                                                 content_type=content_type, accept=accept)
        except _RetryAfter as retry:
            raise retry.error from None
        raise AssertionError("unreachable: AsyncRetrying reraises")

    async def _call_once(self, method: str, path: str, *, query: list[tuple[str, str]] | None,
                         body: object, content_type: str, accept: str) -> Json:
        await self._throttle(method)
        # One client span per API call (the executor's writes join the trace of the watch event
        # that caused them); client-go's request metrics alongside.
        with tracer.start_as_current_span(method, kind=SpanKind.CLIENT, attributes={
                "http.request.method": method, "url.path": path,
                "server.address": self._host}) as span:
            started = time.monotonic()
            code: int | None = None
            try:
                result, code, _ = await self.api.call_api(
                    path, method, query_params=query or [], body=body,
                    header_params={"Accept": accept, "Content-Type": content_type},
                    response_types_map=_OBJ_TYPES, auth_settings=_AUTH,
                    _return_http_data_only=False, _request_timeout=self._timeout)
            except ApiException as exc:
                code = int(exc.status or 0) or None
                error = KubeError.from_api_exception(exc)
                wait = retry_after(code, getattr(exc, "headers", None))
                if wait is not None:
                    raise _RetryAfter(wait, error) from None
                raise error from None
            except _CONN_ERRORS as exc:
                raise KubeError(0, "ConnectionError", type(exc).__name__) from None
            finally:
                restclient.observe_request(method=method, host=self._host, code=code,
                                           seconds=time.monotonic() - started)
                if code is not None:
                    span.set_attribute("http.response.status_code", code)
                if code is None or code >= 400:
                    span.set_status(Status(StatusCode.ERROR))
        return result if isinstance(result, dict) else {}

    async def request(self, method: str, path: str, *, body: object = None,
                      content_type: str = "application/json") -> Json:
        """Any other call (a subresource POST, a JSON patch, DeleteOptions with a grace period),
        through the same limiter and error mapping as the verbs below."""
        return await self._call(method, path, body=body, content_type=content_type)

    async def served_resources(self, api_version: str) -> set[str]:
        """The resource names (plurals) the API server serves in `api_version`, from discovery
        (`/api/v1`, `/apis/<group>/<version>`); empty when the group-version is not served (404:
        its CRDs are not installed). Discovery is readable by every authenticated user
        (system:discovery), so this needs no RBAC of its own."""
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        try:
            doc = await self._call("GET", path)
        except KubeError as exc:
            if exc.not_found:
                return set()
            raise
        return {str(r.get("name")) for r in doc.get("resources") or [] if "/" not in str(r.get("name"))}

    async def get(self, res: Resource, *, namespace: str | None, name: str,
                  metadata_only: bool = False) -> Json:
        obj = await self._call("GET", res.path(namespace=namespace, name=name),
                               accept=METADATA_ONLY if metadata_only else "application/json")
        if metadata_only:
            _own_kind(obj, res, True)
        return obj

    async def list_page(self, res: Resource, *, namespace: str | None = None,
                   label_selector: str | None = None, limit: int = 500,
                   continue_token: str | None = None, metadata_only: bool = False) -> Json:
        query = [("limit", str(limit))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if continue_token:
            query.append(("continue", continue_token))
        return await self._call("GET", res.path(namespace=namespace), query=query,
                                accept=METADATA_LIST if metadata_only else "application/json")

    async def list_all(self, res: Resource, *, namespace: str | None = None,
                       label_selector: str | None = None, page: int = 500,
                       metadata_only: bool = False) -> tuple[list[Json], str]:
        """Every page of a list; returns the items and the list's resourceVersion to watch from.
        `metadata_only`: PartialObjectMetadata items (client-go's metadata informers), labelled
        with the resource's own apiVersion/kind."""
        items: list[Json] = []
        token: str | None = None
        while True:
            page_body = await self.list_page(res, namespace=namespace, label_selector=label_selector,
                                             limit=page, continue_token=token, metadata_only=metadata_only)
            for item in page_body.get("items") or []:
                # List items omit apiVersion/kind; restore them so published objects are whole.
                _own_kind(item, res, metadata_only)
                items.append(item)
            meta = page_body.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    async def watch(self, res: Resource, *, resource_version: str, namespace: str | None = None,
                    label_selector: str | None = None, timeout_s: int = 300,
                    metadata_only: bool = False) -> AsyncIterator[WatchEvent]:
        """One watch request; ends when the server closes it (timeoutSeconds). An ERROR event
        (410 Expired when resource_version is compacted) is raised as KubeError."""
        query = [("watch", "true"), ("allowWatchBookmarks", "true"),
                 ("resourceVersion", resource_version), ("timeoutSeconds", str(timeout_s))]
        if label_selector:
            query.append(("labelSelector", label_selector))
        await self._throttle("GET")
        try:
            resp = await self.api.call_api(
                res.path(namespace=namespace), "GET", query_params=query,
                header_params={"Accept": METADATA_ONLY if metadata_only else "application/json"},
                auth_settings=_AUTH, _preload_content=False, _request_timeout=timeout_s + 30)
        except _CONN_ERRORS as exc:
            restclient.observe_request(method="GET", host=self._host, code=None, seconds=None)
            raise KubeError(0, "ConnectionError", type(exc).__name__) from None
        # client-go's Watch counts the request (updateURLMetrics), not its open-ended latency.
        restclient.observe_request(method="GET", host=self._host, code=resp.status, seconds=None)
        try:
            if resp.status != 200:
                raise KubeError.from_status(resp.status, await resp.read())
            async for raw in resp.content:
                line = raw.strip()
                if not line:
                    continue
                # pydantic-core's parser: about half the CPU of json.loads on a Pod (the watcher
                # decodes every event of every watched object: 14% of its CPU).
                event = from_json(line)
                etype, obj = event.get("type"), event.get("object") or {}
                if etype == "ERROR":
                    raise KubeError.from_status(int(obj.get("code") or 500), obj)
                if etype in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                    _own_kind(obj, res, metadata_only)
                    yield WatchEvent(type=etype, object=obj)
        except _CONN_ERRORS as exc:
            raise KubeError(0, "ConnectionError", type(exc).__name__) from None
        finally:
            resp.release()

    async def create(self, res: Resource, body: Json, *, namespace: str | None) -> Json:
        return await self._call("POST", res.path(namespace=namespace), body=body)

    async def delete(self, res: Resource, *, namespace: str | None, name: str,
                     uid: str | None = None, propagation: str | None = None) -> Json:
        options: Json = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if uid:
            options["preconditions"] = {"uid": uid}  # act only on the incarnation decided about
        if propagation:
            options["propagationPolicy"] = propagation
        return await self._call("DELETE", res.path(namespace=namespace, name=name), body=options)

    async def server_side_apply(self, res: Resource, body: Json, *, namespace: str | None, field_manager: str,
                                force: bool = False) -> Json:
        """`kubectl apply --server-side [--force-conflicts]`: what installs objects too large for
        client-side apply's last-applied annotation (the full-schema CRDs)."""
        query = [("fieldManager", field_manager), *([("force", "true")] if force else [])]
        return await self._call("PATCH", res.path(namespace=namespace, name=body["metadata"]["name"]), query=query,
                                body=body, content_type="application/apply-patch+yaml")

    async def merge_patch(self, res: Resource, *, namespace: str | None, name: str,
                          patch: Json) -> Json:
        return await self._call("PATCH", res.path(namespace=namespace, name=name), body=patch,
                                content_type="application/merge-patch+json")

    async def replace_status(self, res: Resource, obj: Json) -> Json:
        """PUT to /status; obj carries metadata.resourceVersion, so a stale write gets 409."""
        meta = obj.get("metadata") or {}
        return await self._call("PUT", res.path(namespace=meta.get("namespace"),
                                                name=meta["name"], subresource="status"), body=obj)
