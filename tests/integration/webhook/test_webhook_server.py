"""The webhook service's HTTPS server on loopback (services/webhook): answers AdmissionReviews over
TLS only, survives what is not one, and serves a renewed certificate without a restart.

Red team (a new listener): it speaks TLS only (a plain-HTTP caller gets no answer), a caller that
sends garbage gets a 400 and the server keeps serving, and what any caller can obtain is a verdict:
the service holds no credentials and writes nothing (its Deployment mounts no ServiceAccount token:
tests/unit/deploy/test_kustomize.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from raybus.cli.webhook import TlsMaterial, issue, new_ca
from tests.unit.api.builders import mutated, raycluster
from webhook.app import WebhookService
from webhook.settings import WebhookSettings

pytestmark = pytest.mark.integration
NOW = dt.datetime.now(dt.UTC)


def write(material: TlsMaterial, d: Path) -> None:
    (d / "tls.key.new").write_bytes(material.tls_key)
    (d / "tls.crt.new").write_bytes(material.tls_crt)
    (d / "tls.key.new").replace(d / "tls.key")
    (d / "tls.crt.new").replace(d / "tls.crt")


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[WebhookService, TlsMaterial]]:
    material = issue(*new_ca(NOW), ["127.0.0.1"], NOW)
    write(material, tmp_path)
    service = WebhookService(WebhookSettings(bind="127.0.0.1", port=0, tls_cert_file=str(tmp_path / "tls.crt"),
                                             tls_key_file=str(tmp_path / "tls.key")))
    await service.start()
    try:
        yield service, material
    finally:
        await service.stop()


def client_tls(material: TlsMaterial) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=material.ca_crt.decode())


def review(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "0a1b", "operation": "CREATE", "kind": {"group": "ray.io", "version": "v1", "kind": obj["kind"]},
        "namespace": "ns", "name": obj["metadata"]["name"], "object": obj}}


async def post(service: WebhookService, material: TlsMaterial, body: Any, *, raw: bytes | None = None) -> Any:
    url = f"https://127.0.0.1:{service.port}/validate-ray-io-v1-raycluster"
    async with aiohttp.ClientSession() as http:
        kwargs: dict[str, Any] = {"data": raw} if raw is not None else {"json": body}
        async with http.post(url, ssl=client_tls(material), **kwargs) as answer:
            return answer.status, await answer.json()


async def test_allows_and_denies_over_tls(served: tuple[WebhookService, TlsMaterial]) -> None:
    service, material = served
    status, body = await post(service, material, review(raycluster()))
    assert status == 200 and body["response"] == {"uid": "0a1b", "allowed": True}
    twice = mutated(raycluster(), lambda d: d["spec"]["workerGroupSpecs"].append(d["spec"]["workerGroupSpecs"][0]))
    status, body = await post(service, material, review(twice))
    assert status == 200 and body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == (
        'RayCluster.ray.io "demo" is invalid: spec.workerGroupSpecs[1]: Invalid value: "small": worker group names '
        "must be unique")


async def test_plain_http_gets_no_answer(served: tuple[WebhookService, TlsMaterial]) -> None:
    service, _ = served
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientError):
            async with http.post(f"http://127.0.0.1:{service.port}/validate-ray-io-v1-raycluster", json={}) as r:
                await r.read()


async def test_garbage_is_a_400_and_the_server_keeps_serving(served: tuple[WebhookService, TlsMaterial]) -> None:
    service, material = served
    for raw in (b"not json", b"[]", b'{"request": {}}', b'{"request": {"uid": "x"}}'):
        status, body = await post(service, material, None, raw=raw)
        if status == 200:  # an AdmissionReview that names nothing to validate: refused, not allowed
            assert body["response"]["allowed"] is False
        else:
            assert status == 400
    status, body = await post(service, material, review(raycluster()))
    assert status == 200 and body["response"]["allowed"] is True


async def _served_serial(service: WebhookService, material: TlsMaterial) -> int:
    _, writer = await asyncio.open_connection("127.0.0.1", service.port, ssl=client_tls(material))
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return int(x509.load_der_x509_certificate(der).serial_number)
    finally:
        writer.close()


async def test_a_renewed_certificate_is_served_without_a_restart(
        served: tuple[WebhookService, TlsMaterial], tmp_path: Path) -> None:
    service, material = served
    first = await _served_serial(service, material)
    assert first == x509.load_pem_x509_certificate(material.tls_crt).serial_number
    renewed = issue(material.ca_crt, material.ca_key, ["127.0.0.1"], NOW)  # same CA: callers keep trusting it
    write(renewed, tmp_path)
    assert await _served_serial(service, material) == x509.load_pem_x509_certificate(renewed.tls_crt).serial_number
    status, body = await post(service, material, review(raycluster()))
    assert status == 200 and body["response"]["allowed"] is True
