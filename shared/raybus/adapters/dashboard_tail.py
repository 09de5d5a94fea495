"""A Ray job's log tail stream: `GET /api/jobs/<id>/logs/tail`, the WebSocket behind
`ray job logs --follow` (Ray's `JobSubmissionClient.tail_job_logs`).

The head (job_head.py `tail_job_logs`) answers a plain 404 for an unknown job and 400 for a
DRIVER job; otherwise it upgrades, sends the job's log text as TEXT frames and closes the socket
once the job is terminal (its JobManager looks every second). The dashboard-poller holds one such
stream per followed job and uses its end as the signal "the job has most likely ended: read it".
It does not keep the text: frames are read and dropped (the head pushes them; not reading them
would only buffer them).

httpx has no WebSockets, so this uses aiohttp (one ClientSession per process, injected). The
handshake is the only request; the open connection then costs the head nothing per second, as
for the submitter container that holds the same stream in K8sJobMode. Handshake failures raise
the client's typed errors (`dashboard.py`): `JobNotFound` (404), `DashboardBadRequest` (400),
`DashboardRequestError` (other 4xx), `DashboardUnreachable` (timeout, refused, 5xx, anything that
is not an upgrade). Each handshake is counted in `raybus_dashboard_requests_total` (code 101 when
upgraded).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import aiohttp

from raybus.adapters.dashboard import (
    AUTH_HEADER,
    DashboardError,
    DashboardUnreachable,
    job_path,
    status_error,
)
from raybus.observability.metrics import DASHBOARD_REQUESTS

log = logging.getLogger(__name__)
TAIL_ENDPOINT = "GET /api/jobs/{id}/logs/tail"  # metrics label
_DATA = (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY)


@dataclass(frozen=True, kw_only=True)
class TailEnd:
    """How a stream ended. `clean`: the head sent a close frame (what it does when the job is
    terminal, or when the job is deleted); otherwise the connection broke (head gone, heartbeat
    lost, protocol error)."""

    clean: bool
    code: int | None
    detail: str
    frames: int  # log frames received (and dropped)


class LogTail:
    """One open stream. `wait_closed()` returns when it ends; `close()` ends it from our side."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse[bool]) -> None:
        self._ws = ws

    async def wait_closed(self) -> TailEnd:
        frames = 0
        while True:
            msg = await self._ws.receive()
            if msg.type in _DATA:
                frames += 1
                continue
            if msg.type is aiohttp.WSMsgType.CLOSE:
                return TailEnd(clean=True, code=self._ws.close_code, detail="closed by the head",
                               frames=frames)
            if msg.type is aiohttp.WSMsgType.ERROR:
                return TailEnd(clean=False, code=self._ws.close_code,
                               detail=f"stream error: {type(msg.data).__name__}: {msg.data}"[:300],
                               frames=frames)
            if msg.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING):
                return TailEnd(clean=False, code=self._ws.close_code, detail="connection lost",
                               frames=frames)

    async def close(self) -> None:
        await self._ws.close()


async def open_log_tail(session: aiohttp.ClientSession, *, base_url: str, job_id: str,
                        auth_token: str | None = None, connect_timeout_s: float = 2.0,
                        heartbeat_s: float | None = 30.0) -> LogTail:
    """Open the stream (one request). `heartbeat_s`: ping this often and treat a missing pong as a
    broken stream (a head that vanished without closing its sockets)."""
    url = f"{base_url.rstrip('/')}{job_path(job_id, '/logs/tail')}"
    headers = {AUTH_HEADER: f"Bearer {auth_token}"} if auth_token else {}
    what = f"GET .../logs/tail of {job_id}"
    try:
        async with asyncio.timeout(connect_timeout_s):
            ws = await session.ws_connect(url, headers=headers, heartbeat=heartbeat_s, autoping=True,
                                          timeout=aiohttp.ClientWSTimeout(ws_close=connect_timeout_s))
    except aiohttp.WSServerHandshakeError as exc:
        DASHBOARD_REQUESTS.labels(endpoint=TAIL_ENDPOINT, code=str(exc.status)).inc()
        raise _handshake_error(exc.status, f"{what}: HTTP {exc.status}: {exc.message}") from None
    except TimeoutError:
        DASHBOARD_REQUESTS.labels(endpoint=TAIL_ENDPOINT, code="timeout").inc()
        raise DashboardUnreachable(f"{what}: timed out") from None
    except aiohttp.ClientError as exc:
        DASHBOARD_REQUESTS.labels(endpoint=TAIL_ENDPOINT, code="error").inc()
        raise DashboardUnreachable(f"{what}: {type(exc).__name__}: {exc}"[:300]) from None
    DASHBOARD_REQUESTS.labels(endpoint=TAIL_ENDPOINT, code="101").inc()
    return LogTail(ws)


def _handshake_error(status: int, detail: str) -> DashboardError:
    if status >= 400:
        return status_error(status, detail, job_route=True)
    # a 2xx/3xx that is not an upgrade (an HTML page from a proxy): no usable answer
    return DashboardUnreachable(detail, status_code=status)
