"""API server faults the chaos soak flips for a few seconds: throttling, server errors, timeouts.

`POST /sim/apiserver/faults {"kind": "429"|"500"|"timeout", "seconds": 5, "ratio": 1.0,
"hang_s": 3.0}` makes this server answer that share of API requests with the fault until the
time is up (`DELETE` ends it early, `GET` shows it and the counts). The answers are the real
kube-apiserver's:
- 429: API Priority and Fairness rejecting a request: `Retry-After: 1` header and
  `details.retryAfterSeconds: 1`, reason TooManyRequests (client-go sleeps Retry-After and
  retries);
- 500: reason InternalError, "Internal error occurred: ...";
- timeout: the request hangs, then 504 reason Timeout, "Timeout: request did not complete
  within requested timeout - context deadline exceeded" (the server's request timeout; a client
  with a shorter one gives up first).

Only requests of non-admin users are hit by default (`"admin": true` includes them): raybus's
services authenticate as their ServiceAccounts, while the simulated node (kubelet) and the soak's
own workload and recorder use the admin token: the fault is in the operator's path, not in the
sim's plumbing or the test's measuring instruments.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web

from .errors import ApiError
from .responses import error_response

KINDS = ("429", "500", "timeout")
RETRY_AFTER_S = 1  # what APF sends


@dataclass
class ApiFaults:
    kind: str = ""
    until: float = 0.0  # monotonic
    ratio: float = 1.0
    hang_s: float = 3.0
    admin: bool = False
    served: Counter[str] = field(default_factory=Counter)
    rng: random.Random = field(default_factory=random.Random)

    def active(self) -> str:
        return self.kind if self.kind and time.monotonic() < self.until else ""

    async def control(self, request: web.Request) -> web.Response:
        if request.method == "DELETE":
            self.kind = ""
        elif request.method == "POST":
            body = await request.json()
            kind = str(body.get("kind", ""))
            if kind not in KINDS:
                return web.json_response({"error": f"kind must be one of {KINDS}"}, status=400)
            self.kind, self.until = kind, time.monotonic() + float(body.get("seconds", 5.0))
            self.ratio = float(body.get("ratio", 1.0))
            self.hang_s = float(body.get("hang_s", 3.0))
            self.admin = bool(body.get("admin", False))
        return web.json_response({"kind": self.active(), "remaining_s": max(0.0, self.until - time.monotonic()),
                                  "served": dict(self.served)})

    async def intercept(self, request: web.Request, *, admin: bool) -> web.StreamResponse | None:
        """The fault's answer for this request, or None to serve it normally."""
        kind = self.active()
        if not kind or (admin and not self.admin) or self.rng.random() >= self.ratio:
            return None
        self.served[kind] += 1
        if kind == "429":
            resp = error_response(ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                                           {"retryAfterSeconds": RETRY_AFTER_S}))
            resp.headers["Retry-After"] = str(RETRY_AFTER_S)
            return resp
        if kind == "500":
            return error_response(ApiError(500, "InternalError",
                                           "Internal error occurred: etcdserver: request timed out",
                                           {"causes": [{"message": "etcdserver: request timed out"}]}))
        await asyncio.sleep(self.hang_s)
        return error_response(ApiError(
            504, "Timeout", "Timeout: request did not complete within requested timeout - context deadline exceeded",
            {}))

