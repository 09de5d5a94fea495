"""Ray dashboard HTTP client, mirroring KubeRay's RayDashboardClientInterface.

KubeRay's `dashboardclient/dashboard_httpclient.go`: GetJobInfo, ListJobs, SubmitJobReq, GetJobLog,
StopJob, DeleteJob, GetServeDetails, GetMultiApplicationStatus, UpdateDeployments; plus the Serve
proxy health check (`RayHttpProxyClient.CheckProxyActorHealth`). Differences that matter:

* Errors are typed so a glitch is never mistaken for a state. `DashboardTransientError`
  (`DashboardUnreachable`: timeouts, connection errors, non-semantic 5xx; `DashboardGarbage`:
  undecodable body) means "try again later"; `DashboardRequestError` subclasses are real answers.
  The real dashboard answers client errors with 500 + traceback (README §3), so the two semantic
  500s are recognised by text: "already exists" -> `JobAlreadyExists`, "non-terminal state" ->
  `JobNotTerminal`.
* Each call has its own timeout (`DashboardTimeouts`): reads keep KubeRay's 2 s
  (`RayHTTPClientTimeoutSeconds`, PR #1910), but writes get what a real head needs: the first
  `PUT /api/serve/applications/` starts the Serve controller and proxy before answering (3.4-9 s
  on a loaded head) and `DELETE /api/serve/applications/` blocks 2.4-3 s while apps run, so a
  single 2 s timeout turned both successes into "unreachable" (README §8).
* A write that got no definite answer (timeout, connection lost after sending, a non-semantic
  5xx) raises `DashboardOutcomeUnknown`: it may or may not have happened. Callers read the state
  back instead of assuming failure or success. Only a refused connection is "not applied".
* Every request is counted in `raybus_dashboard_requests_total{endpoint,code}`.
* Only idempotent GETs are retried, with tenacity, a few attempts with jittered backoff. The worst
  case for a GET is therefore `get_attempts * timeout_s` plus the (sub-second) waits.
* The `x-ray-authorization: Bearer <token>` header is added per request when a token is given;
  the token never appears in logs, exception messages or repr.
* The httpx.AsyncClient is injected (one pooled client per process, keep-alive: README §5 shows
  a new client per request costs ~20 ms).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import httpx
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from pydantic import BaseModel, TypeAdapter, ValidationError
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from raybus.adapters.dashboard_models import (
    JobDeleteResponse,
    JobDetails,
    JobLogs,
    JobStopResponse,
    JobSubmitRequest,
    JobSubmitResponse,
    ServeApplicationStatus,
    ServeDetails,
    VersionInfo,
)
from raybus.observability.metrics import DASHBOARD_REQUESTS

tracer = trace.get_tracer("raybus.dashboard")  # a CLIENT span per request (HTTP conventions)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 2.0  # KubeRay: 2 s direct (10 s via the K8s API proxy)
IN_CLUSTER_TEMPLATE = "http://{service}.{namespace}.svc.cluster.local:8265"
JOBS_PATH = "/api/jobs/"
SERVE_PATH = "/api/serve/applications/"
JOB_ENDPOINT = "/api/jobs/{id}"  # metrics label: ids are unbounded, never a label value
AUTH_HEADER = "x-ray-authorization"

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
_JOB_LIST = TypeAdapter(list[JobDetails])


class DashboardError(Exception):
    """Base of every dashboard client error. `status_code` is None when no response arrived."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class DashboardTransientError(DashboardError):
    """No usable answer: retry later, never treat as a job/app state."""


class DashboardUnreachable(DashboardTransientError):
    """Timeout, connection refused/reset, or a 5xx that carries no meaning (502/503/504, 500s
    other than the recognised quirks)."""


class DashboardOutcomeUnknown(DashboardUnreachable):
    """A write without a definite answer (timed out, connection lost after sending, 5xx that is
    not a recognised refusal): the head may have applied it. Read the state back; never assume."""


class DashboardGarbage(DashboardTransientError):
    """A 2xx whose body is not the JSON we expect (invalid JSON, an HTML page, wrong shape)."""


class DashboardRequestError(DashboardError):
    """The dashboard understood and refused the request (4xx or a semantic 500)."""


class DashboardBadRequest(DashboardRequestError):
    """400: validation failure (job submit schema, Serve config schema)."""


class JobNotFound(DashboardRequestError):
    """404 on a job route: `Job <id> does not exist` (40_err_*)."""


class JobAlreadyExists(DashboardRequestError):
    """Duplicate submission_id: the head answers 500 with a ValueError traceback (41_*)."""


class JobNotTerminal(DashboardRequestError):
    """DELETE of a PENDING/RUNNING job: 500 with 'non-terminal state' (33_*, 81_*)."""


@dataclass(frozen=True, kw_only=True)
class DashboardTimeouts:
    """Seconds per call. Reads keep KubeRay's 2 s (README §5: a GET costs 1-3 ms, so 2 s means
    "not answering"); writes wait for what a real Ray 2.60 head takes (README §8)."""

    read_s: float = DEFAULT_TIMEOUT_S
    submit_job_s: float = 10.0  # runtime-env checks happen later, the POST itself is fast
    stop_job_s: float = 10.0
    delete_job_s: float = 10.0
    serve_put_s: float = 20.0  # the first PUT starts Serve: 3.4-9 s measured
    serve_delete_s: float = 15.0  # synchronous serve.shutdown(): 2.4-3 s with running apps


def render_base_url(template: str, *, namespace: str, cluster: str, service: str | None = None) -> str:
    """Fill a base-URL template; `{service}` defaults to KubeRay's head service `<cluster>-head-svc`.

    In-cluster: ``IN_CLUSTER_TEMPLATE``; against the simulator:
    ``"http://127.0.0.1:PORT/{namespace}/{cluster}"`` (and ``.../serve`` for the proxy).
    """
    try:
        url = template.format(namespace=namespace, cluster=cluster, service=service or f"{cluster}-head-svc")
    except (KeyError, IndexError) as exc:
        raise ValueError(f"unknown placeholder in dashboard URL template {template!r}: {exc}") from None
    return url.rstrip("/")


def job_path(job_id: str, suffix: str = "") -> str:
    """Submission ids come from users (RayJob spec.jobId): percent-encode them into one segment."""
    return f"{JOBS_PATH}{quote(job_id, safe='')}{suffix}"


def _last_line(body: str) -> str:
    """The informative part of a traceback / pydantic error body is its last meaningful line."""
    lines = [
        line.strip()
        for line in body.strip().splitlines()
        if line.strip() not in ("", ".") and not line.strip().startswith("For further information")
    ]
    return (lines[-1] if lines else "")[:300]


def _classify(response: httpx.Response, *, what: str, job_route: bool) -> DashboardError | None:
    status = response.status_code
    if 200 <= status < 300:
        return None
    body = response.text
    detail = f"{what}: HTTP {status}: {_last_line(body)}"
    if status == 500 and "already exists" in body and "submission_id" in body:
        return JobAlreadyExists(detail, status_code=status)
    if status == 500 and "non-terminal state" in body:
        return JobNotTerminal(detail, status_code=status)
    return status_error(status, detail, job_route=job_route)


def status_error(status: int, detail: str, *, job_route: bool) -> DashboardError:
    """The typed error of a non-2xx answer by its status alone (also the log tail's handshake)."""
    if status == 404 and job_route:
        return JobNotFound(detail, status_code=status)
    if status == 400:
        return DashboardBadRequest(detail, status_code=status)
    if status >= 500:
        return DashboardUnreachable(detail, status_code=status)
    return DashboardRequestError(detail, status_code=status)


class RayDashboardClient:
    """Client for one Ray head's dashboard. Cheap to create; share the httpx client."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        auth_token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        timeouts: DashboardTimeouts | None = None,
        get_attempts: int = 3,
        retry_wait_s: float = 0.1,
    ) -> None:
        self._http = http
        self.base_url = base_url.rstrip("/")
        parts = urlsplit(self.base_url)
        self._server = (parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
        self._token = auth_token
        # `timeout_s` (reads) is kept for callers that only set that one.
        self.timeouts = timeouts or DashboardTimeouts(read_s=timeout_s)
        self._timeout = httpx.Timeout(self.timeouts.read_s)
        self._get_attempts = max(1, get_attempts)
        self._retry_wait_s = retry_wait_s

    @classmethod
    def for_cluster(
        cls,
        http: httpx.AsyncClient,
        *,
        template: str,
        namespace: str,
        cluster: str,
        service: str | None = None,
        auth_token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        timeouts: DashboardTimeouts | None = None,
        get_attempts: int = 3,
    ) -> RayDashboardClient:
        base = render_base_url(template, namespace=namespace, cluster=cluster, service=service)
        return cls(http, base_url=base, auth_token=auth_token, timeout_s=timeout_s, timeouts=timeouts,
                   get_attempts=get_attempts)

    def __repr__(self) -> str:  # never shows the token
        return f"RayDashboardClient(base_url={self.base_url!r}, auth={'yes' if self._token else 'no'})"

    # ---- transport -------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return {AUTH_HEADER: f"Bearer {self._token}"} if self._token else {}

    async def _send(
        self,
        method: str,
        path: str,
        *,
        endpoint: str,
        timeout_s: float | None = None,
        job_route: bool = False,
        body: bytes | None = None,
    ) -> httpx.Response:
        """One request. `endpoint` is the path template used as the metrics label."""
        what = f"{method} {path}"
        write = method != "GET"
        label = f"{method} {endpoint}"
        headers = self._headers()
        if body is not None:
            headers["content-type"] = "application/json"
        timeout = self._timeout if timeout_s is None else httpx.Timeout(timeout_s)
        with tracer.start_as_current_span(label, kind=SpanKind.CLIENT, attributes={
                "http.request.method": method, "url.template": endpoint, "url.full": self.base_url + path,
                "server.address": self._server[0], "server.port": self._server[1]}) as span:
            return await self._traced_send(span, method, path, label=label, what=what, write=write,
                                           headers=headers, body=body, timeout=timeout, job_route=job_route)

    async def _traced_send(self, span: Span, method: str, path: str, *, label: str, what: str, write: bool,
                           headers: dict[str, str], body: bytes | None, timeout: httpx.Timeout,
                           job_route: bool) -> httpx.Response:
        try:
            response = await self._http.request(
                method, self.base_url + path, content=body, headers=headers, timeout=timeout
            )
        except httpx.TimeoutException as exc:
            span.set_status(Status(StatusCode.ERROR, "timeout"))
            DASHBOARD_REQUESTS.labels(endpoint=label, code="timeout").inc()
            # A connect timeout never reached the head; any other timeout may have been applied.
            if write and not isinstance(exc, httpx.ConnectTimeout):
                raise DashboardOutcomeUnknown(f"{what}: timed out ({type(exc).__name__})") from None
            raise DashboardUnreachable(f"{what}: timed out ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            DASHBOARD_REQUESTS.labels(endpoint=label, code="error").inc()
            if write and not isinstance(exc, httpx.ConnectError):
                raise DashboardOutcomeUnknown(f"{what}: {type(exc).__name__}: {exc}") from None
            raise DashboardUnreachable(f"{what}: {type(exc).__name__}: {exc}") from None
        DASHBOARD_REQUESTS.labels(endpoint=label, code=str(response.status_code)).inc()
        span.set_attribute("http.response.status_code", response.status_code)
        if response.status_code >= 400:
            span.set_status(Status(StatusCode.ERROR))
        log.debug("dashboard %s %s -> %s", method, path, response.status_code)
        error = _classify(response, what=what, job_route=job_route)
        if error is not None:
            if write and type(error) is DashboardUnreachable:
                raise DashboardOutcomeUnknown(str(error), status_code=error.status_code)
            raise error
        return response

    def _retrying(self) -> AsyncRetrying:
        """Only for idempotent GETs: retry transient errors, a few attempts, jittered backoff."""
        return AsyncRetrying(
            stop=stop_after_attempt(self._get_attempts),
            wait=wait_exponential_jitter(initial=self._retry_wait_s, max=self._retry_wait_s * 4),
            retry=retry_if_exception_type(DashboardTransientError),
            reraise=True,
        )

    async def _get_parsed(
        self, path: str, parse: Callable[[Any], T], *, endpoint: str, job_route: bool = False
    ) -> T:
        """GET, decode and validate inside the retry loop: garbage is transient and retried too."""
        async for attempt in self._retrying():
            with attempt:
                response = await self._send("GET", path, endpoint=endpoint, job_route=job_route)
                return parse(_json(response, what=f"GET {path}"))
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    async def _get_text(self, path: str) -> str:
        async for attempt in self._retrying():
            with attempt:
                return (await self._send("GET", path, endpoint=path)).text
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover

    # ---- jobs ------------------------------------------------------------------------------

    async def get_job_info(self, job_id: str) -> JobDetails:
        """GET /api/jobs/<id>: by submission id or hex Ray job id. JobNotFound on 404."""
        return await self._get_parsed(
            job_path(job_id), _validator(JobDetails), endpoint=JOB_ENDPOINT, job_route=True
        )

    async def list_jobs(self) -> list[JobDetails]:
        """GET /api/jobs/: SUBMISSION and DRIVER entries, unstable order (README §3)."""

        def parse(data: Any) -> list[JobDetails]:
            try:
                return _JOB_LIST.validate_python(data)
            except ValidationError as exc:
                raise DashboardGarbage(f"job list: unexpected shape: {exc.error_count()} errors") from None

        return await self._get_parsed(JOBS_PATH, parse, endpoint=JOBS_PATH)

    async def submit_job(self, request: JobSubmitRequest) -> str:
        """POST /api/jobs/; returns the submission id. JobAlreadyExists on a duplicate id.

        Not retried. After `DashboardUnreachable` the job may still have been created: resubmit
        with the same submission_id and treat `JobAlreadyExists` as success.
        """
        body = json.dumps(request.to_body()).encode()
        response = await self._send(
            "POST", JOBS_PATH, endpoint=JOBS_PATH, body=body, timeout_s=self.timeouts.submit_job_s
        )
        return _parse(JobSubmitResponse, response, what="submit").submission_id

    async def get_job_log(self, job_id: str) -> str:
        logs = await self._get_parsed(
            job_path(job_id, "/logs"), _validator(JobLogs), endpoint=JOB_ENDPOINT + "/logs", job_route=True
        )
        return logs.logs

    async def stop_job(self, job_id: str) -> bool:
        """POST /api/jobs/<id>/stop: True if a stop was issued, False if already terminal (36_*)."""
        response = await self._send(
            "POST", job_path(job_id, "/stop"), endpoint=JOB_ENDPOINT + "/stop", job_route=True,
            timeout_s=self.timeouts.stop_job_s,
        )
        return _parse(JobStopResponse, response, what=f"stop {job_id}").stopped

    async def delete_job(self, job_id: str) -> None:
        """DELETE /api/jobs/<id>. JobNotTerminal if still running; JobNotFound if gone.

        A job deleted within a few seconds of ending may come back as a FAILED ghost
        (`JobDetails.is_supervisor_ghost`, README §3): callers should tolerate and re-delete it.
        """
        response = await self._send(
            "DELETE", job_path(job_id), endpoint=JOB_ENDPOINT, job_route=True,
            timeout_s=self.timeouts.delete_job_s,
        )
        _parse(JobDeleteResponse, response, what=f"delete {job_id}")

    # ---- serve -----------------------------------------------------------------------------

    async def get_serve_details(self) -> ServeDetails:
        return await self._get_parsed(
            f"{SERVE_PATH}?api_type=declarative", _validator(ServeDetails), endpoint=SERVE_PATH
        )

    async def get_multi_application_status(self) -> dict[str, ServeApplicationStatus]:
        details = await self.get_serve_details()
        return {name: ServeApplicationStatus.from_details(app) for name, app in details.applications.items()}

    async def update_deployments(self, config: Mapping[str, Any] | bytes) -> None:
        """PUT /api/serve/applications/: declarative, replaces the whole app set (README §4)."""
        body = config if isinstance(config, bytes) else json.dumps(config).encode()
        await self._send("PUT", SERVE_PATH, endpoint=SERVE_PATH, body=body, timeout_s=self.timeouts.serve_put_s)

    async def shutdown_serve(self) -> None:
        """DELETE /api/serve/applications/ (synchronous serve.shutdown(), 2.5 s on a real head)."""
        await self._send("DELETE", SERVE_PATH, endpoint=SERVE_PATH, timeout_s=self.timeouts.serve_delete_s)

    # ---- misc ------------------------------------------------------------------------------

    async def get_version(self) -> VersionInfo:
        return await self._get_parsed("/api/version", _validator(VersionInfo), endpoint="/api/version")

    async def check_gcs_health(self) -> bool:
        """GET /api/gcs_healthz: 200 `success` (00_dashboard_gcs_healthz)."""
        response = await self._get_text("/api/gcs_healthz")
        return response.strip() == "success"


class RayHttpProxyClient:
    """Serve proxy health (`GET /-/healthz` on port 8000), KubeRay's CheckProxyActorHealth."""

    def __init__(
        self, http: httpx.AsyncClient, *, base_url: str, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self._http = http
        self.base_url = base_url.rstrip("/")
        self._timeout = httpx.Timeout(timeout_s)

    async def is_healthy(self) -> bool:
        """True only for 200 `success`. A refused connection, timeout, 503 "This node is being
        drained." or 503 "Route table is not populated yet." (a fresh Serve whose only app failed
        at import, README §8) is False, as in KubeRay (the head pod's serve label goes false)."""
        label = "GET /-/healthz"
        try:
            response = await self._http.get(self.base_url + "/-/healthz", timeout=self._timeout)
        except httpx.HTTPError as exc:
            code = "timeout" if isinstance(exc, httpx.TimeoutException) else "error"
            DASHBOARD_REQUESTS.labels(endpoint=label, code=code).inc()
            log.debug("proxy %s unhealthy: %s", self.base_url, type(exc).__name__)
            return False
        DASHBOARD_REQUESTS.labels(endpoint=label, code=str(response.status_code)).inc()
        return response.status_code == 200 and response.text.strip() == "success"


def _json(response: httpx.Response, *, what: str) -> Any:
    content_type = response.headers.get("content-type", "")
    if "html" in content_type:
        raise DashboardGarbage(
            f"{what}: got an HTML page ({response.status_code})", status_code=response.status_code
        )
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DashboardGarbage(f"{what}: body is not JSON", status_code=response.status_code) from None


def _validator(model: type[M]) -> Callable[[Any], M]:
    def validate(data: Any) -> M:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise DashboardGarbage(
                f"{model.__name__}: unexpected shape: {exc.error_count()} errors"
            ) from None

    return validate


def _parse(model: type[M], response: httpx.Response, *, what: str) -> M:
    try:
        return model.model_validate(_json(response, what=what))
    except ValidationError as exc:
        raise DashboardGarbage(f"{what}: unexpected shape: {exc.error_count()} errors") from None
