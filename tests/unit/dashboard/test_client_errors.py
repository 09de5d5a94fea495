"""Error mapping, auth header and retry policy of RayDashboardClient, fed the captured bodies.

httpx.MockTransport replays the exact status codes, content types and bodies a real Ray 2.60 head
returned; the real-HTTP behaviour against the simulator is covered in tests/integration/dashboard.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import httpx
import pytest

from raybus.adapters.dashboard import (
    DashboardBadRequest,
    DashboardGarbage,
    DashboardRequestError,
    DashboardTransientError,
    DashboardUnreachable,
    JobAlreadyExists,
    JobNotFound,
    JobNotTerminal,
    RayDashboardClient,
    render_base_url,
)
from raybus.adapters.dashboard_models import JobSubmitRequest
from tests.conftest import DASHBOARD_CAPTURES

TOKEN = "s3cr3t-token-value"


def captured(name: str) -> httpx.Response:
    """The captured status, content type and raw body of exchange `name`."""
    exchange = json.loads((DASHBOARD_CAPTURES / f"{name}.exchange.json").read_text())
    raw = next(DASHBOARD_CAPTURES.glob(f"{name}.response.*")).read_bytes()
    headers = {k: v for k, v in exchange["response"]["headers"].items() if k == "content-type"}
    return httpx.Response(exchange["response"]["status_code"], headers=headers, content=raw)


def make_client(
    handler: Callable[[httpx.Request], httpx.Response], **kwargs: object
) -> tuple[RayDashboardClient, httpx.AsyncClient]:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = RayDashboardClient(http, base_url="http://head:8265", retry_wait_s=0.001, **kwargs)
    return client, http


def fixed(name: str) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: captured(name)


async def test_duplicate_submission_is_job_already_exists() -> None:
    client, http = make_client(fixed("41_err_POST_duplicate_submission_id"))
    with pytest.raises(JobAlreadyExists) as err:
        await client.submit_job(JobSubmitRequest(entrypoint="x", submission_id="test-job-1"))
    assert err.value.status_code == 500 and "already exists" in str(err.value)
    await http.aclose()


@pytest.mark.parametrize("name", ["33_joblong_DELETE_while_running", "81_jobpend_DELETE_while_PENDING"])
async def test_delete_non_terminal_is_job_not_terminal(name: str) -> None:
    client, http = make_client(fixed(name))
    with pytest.raises(JobNotTerminal):
        await client.delete_job("test-job-long")
    await http.aclose()


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("40_err_GET_unknown_job", "get_job_info"),
        ("40_err_GET_unknown_job_logs", "get_job_log"),
        ("40_err_POST_stop_unknown_job", "stop_job"),
        ("40_err_DELETE_unknown_job", "delete_job"),
    ],
)
async def test_unknown_job_is_job_not_found(name: str, call: str) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return captured(name)

    client, http = make_client(handler)
    with pytest.raises(JobNotFound):
        await getattr(client, call)("no-such-job")
    assert calls == 1  # a 404 is an answer, never retried
    await http.aclose()


async def test_validation_errors_are_bad_requests() -> None:
    client, http = make_client(fixed("42_err_POST_missing_entrypoint"))
    with pytest.raises(DashboardBadRequest) as err:
        await client.submit_job(JobSubmitRequest(entrypoint="x"))
    assert "entrypoint" in str(err.value)
    client, http2 = make_client(fixed("181_serve_err_PUT_missing_import_path"))
    with pytest.raises(DashboardBadRequest):
        await client.update_deployments({"applications": [{"name": "x"}]})
    await http.aclose()
    await http2.aclose()


async def test_browser_rejection_is_a_request_error_not_transient() -> None:
    client, http = make_client(fixed("184_jobs_POST_browser_user_agent"))
    with pytest.raises(DashboardRequestError) as err:
        await client.submit_job(JobSubmitRequest(entrypoint="x"))
    assert not isinstance(err.value, DashboardTransientError) and err.value.status_code == 405
    await http.aclose()


async def test_server_trouble_500_is_unreachable_and_get_is_retried() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return captured("42_err_POST_malformed_json") if calls < 3 else captured("11_job1_get_final")

    client, http = make_client(handler, get_attempts=3)
    info = await client.get_job_info("test-job-1")
    assert info.status.value == "SUCCEEDED" and calls == 3
    await http.aclose()


async def test_post_is_never_retried() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(503, text="upstream connect error")

    client, http = make_client(handler, get_attempts=5)
    with pytest.raises(DashboardUnreachable):
        await client.stop_job("j")
    assert calls == 1
    await http.aclose()


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (
            httpx.Response(200, headers={"content-type": "application/json"}, content=b'{"status": "RUN'),
            DashboardGarbage,
        ),
        (
            httpx.Response(200, headers={"content-type": "text/html"}, content=b"<html></html>"),
            DashboardGarbage,
        ),
        (httpx.Response(200, json={"status": "NOT_A_STATUS"}), DashboardGarbage),
        (
            httpx.Response(502, headers={"content-type": "text/html"}, content=b"<html>502</html>"),
            DashboardUnreachable,
        ),
        (httpx.Response(504, text="gateway timeout"), DashboardUnreachable),
    ],
)
async def test_glitches_are_transient(response: httpx.Response, expected: type[Exception]) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return response

    client, http = make_client(handler, get_attempts=2)
    with pytest.raises(expected):
        await client.get_job_info("j")
    assert calls == 2  # bounded: exactly get_attempts tries
    await http.aclose()


async def test_connection_errors_are_unreachable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client, http = make_client(handler, get_attempts=1)
    with pytest.raises(DashboardUnreachable):
        await client.list_jobs()
    await http.aclose()


async def test_auth_header_sent_and_token_never_leaks(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("x-ray-authorization"))
        return httpx.Response(503, text="no")

    caplog.set_level(logging.DEBUG)
    client, http = make_client(handler, auth_token=TOKEN, get_attempts=2)
    with pytest.raises(DashboardUnreachable) as err:
        await client.get_serve_details()
    assert seen == [f"Bearer {TOKEN}"] * 2
    assert TOKEN not in str(err.value) and TOKEN not in repr(client) and TOKEN not in caplog.text
    await http.aclose()


async def test_no_auth_header_without_token() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return captured("00_dashboard_version")

    client, http = make_client(handler)
    version = await client.get_version()
    assert version.ray_version == "2.60.0" and "x-ray-authorization" not in seen[0].headers
    assert str(seen[0].url) == "http://head:8265/api/version"
    await http.aclose()


async def test_submit_body_omits_unset_fields() -> None:
    bodies: list[object] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return captured("10_job1_submit_POST")

    client, http = make_client(handler)
    sid = await client.submit_job(JobSubmitRequest(entrypoint="echo hi", submission_id="test-job-1"))
    assert sid == "test-job-1"
    assert bodies == [{"entrypoint": "echo hi", "submission_id": "test-job-1"}]  # unknown keys -> 400
    await http.aclose()


def test_render_base_url() -> None:
    assert (
        render_base_url("http://{service}.{namespace}.svc.cluster.local:8265", namespace="ns", cluster="rc")
        == "http://rc-head-svc.ns.svc.cluster.local:8265"
    )
    assert render_base_url("http://127.0.0.1:9/{namespace}/{cluster}/", namespace="a", cluster="b") == (
        "http://127.0.0.1:9/a/b"
    )
    with pytest.raises(ValueError, match="placeholder"):
        render_base_url("http://{pod_ip}:8265", namespace="a", cluster="b")


async def test_job_ids_are_one_path_segment() -> None:
    paths: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path)
        return captured("36_joblong_stop_again_on_terminal")

    client, http = make_client(handler)
    assert await client.stop_job("team/job#1 x") is False
    assert paths == [b"/api/jobs/team%2Fjob%231%20x/stop"]
    await http.aclose()


def test_for_cluster_builds_in_cluster_url() -> None:
    http = httpx.AsyncClient()
    client = RayDashboardClient.for_cluster(
        http,
        template="http://{service}.{namespace}.svc.cluster.local:8265",
        namespace="ns",
        cluster="rc",
        auth_token=TOKEN,
    )
    assert client.base_url == "http://rc-head-svc.ns.svc.cluster.local:8265"
    assert TOKEN not in repr(client) and "auth=yes" in repr(client)
