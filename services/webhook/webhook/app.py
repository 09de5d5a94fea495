"""webhook: KubeRay v1.7's optional validating webhooks (`vraycluster.kb.io`, `vrayjob.kb.io`,
`vrayservice.kb.io`) as a service of its own, installed by deploy/kustomize/components/webhook.

An HTTPS server (TLS only, the serving certificate of the install's webhook-secrets Job) that the
API server calls on create and update of RayCluster, RayJob and RayService; each answer is
raybus's pure validation (raybus.api.validation_webhook). It holds no credentials and writes
nothing: a caller can learn a verdict, no more. The certificate files are re-read when they change
(a renewed Secret reaches the Pod's volume within the kubelet's sync period), at the next TLS
handshake, so a renewal needs no restart. Health and metrics: the usual metrics port.
"""

from __future__ import annotations

import logging
import os
import ssl
from typing import Any

from aiohttp import web

from raybus.api.settings import FeatureGates
from raybus.observability.metrics import WEBHOOK_ADMISSIONS
from webhook.review import PATHS, respond, review_response
from webhook.settings import WebhookSettings

log = logging.getLogger(__name__)
# An AdmissionReview carries the object and, on update, the old one: two CRs of up to etcd's
# 1.5 MB request limit, plus the envelope.
MAX_REVIEW_BYTES = 4 * 1024 * 1024


class ServingCertificate:
    """An SSLContext that serves the current certificate files: each handshake's SNI callback
    (OpenSSL calls it with or without a server name) swaps in a context built from the files once
    their modification time changed."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._stamp = self._mtimes()
        self._current = self._load()
        self.context = self._load()
        self.context.sni_callback = self._on_handshake

    def _mtimes(self) -> tuple[int, int]:
        return os.stat(self.cert_file).st_mtime_ns, os.stat(self.key_file).st_mtime_ns

    def _load(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def current(self) -> ssl.SSLContext:
        try:
            stamp = self._mtimes()
            if stamp != self._stamp:
                self._current, self._stamp = self._load(), stamp
                log.info("serving certificate reloaded", extra={"cert_file": self.cert_file})
        except (OSError, ssl.SSLError) as exc:  # mid-update (a Secret volume swaps a symlink): keep the last
            log.warning("serving certificate not reloaded", extra={"error": type(exc).__name__})
        return self._current

    def _on_handshake(self, conn: Any, _server_name: str | None, _ctx: ssl.SSLContext) -> None:
        conn.context = self.current()


class WebhookService:
    def __init__(self, settings: WebhookSettings) -> None:
        self.settings = settings
        self.gates = FeatureGates.from_flag(settings.feature_gates)
        self._runner: web.AppRunner | None = None
        self.port = settings.port

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REVIEW_BYTES)
        for path, kind in PATHS.items():
            app.router.add_post(path, self._handler(kind))
        return app

    def _handler(self, kind: str) -> Any:
        async def handle(request: web.Request) -> web.Response:
            try:
                review = await request.json()
                admission = review["request"]
                uid = str(admission["uid"])
            except (ValueError, KeyError, TypeError):
                return web.json_response({"message": "not an AdmissionReview"}, status=400)
            response = respond(kind, admission, strictness=self.settings.strictness, gates=self.gates)
            WEBHOOK_ADMISSIONS.labels(kind=kind, operation=str(admission.get("operation")),
                                      allowed=str(response["allowed"]).lower()).inc()
            if not response["allowed"]:
                log.info("denied", extra={"kind": kind, "namespace": admission.get("namespace"),
                                          "object": admission.get("name"),
                                          "reason": response["status"]["message"]})
            return web.json_response(review_response(uid, response))
        return handle

    async def start(self) -> None:
        tls = ServingCertificate(self.settings.tls_cert_file, self.settings.tls_key_file)
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.settings.bind, self.settings.port, ssl_context=tls.context)
        await site.start()
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]  # port 0: the one the OS chose
        log.info("serving", extra={"port": self.port, "strictness": self.settings.strictness.value})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def create_app(settings: WebhookSettings) -> WebhookService:
    return WebhookService(settings)
