"""`raybus webhook-secrets`: the validating webhook's serving certificate, for the install's Job
(deploy/kustomize/components/webhook) or by hand.

- Secret `--secret` (kubernetes.io/tls: tls.crt, tls.key, ca.crt, and ca.key, which the webhook's
  Pods do not mount) is created if absent: a private CA (10 years) and a serving certificate
  (1 year) for the webhook Service's DNS names. If it exists, its serving certificate is renewed
  from the same CA when it expires within `--renew-within-days` (or with `--renew`); the CA stays,
  so the API server trusts the new certificate at once and no call fails while Pods reload.
- ValidatingWebhookConfiguration `--webhook-configuration`: every webhook's caBundle is set to
  that CA (retried until the configuration exists: kustomize applies it in the same run).

The Job's RBAC names exactly these two objects (resourceNames), except `create`, which Kubernetes
cannot limit by name. A new CA (a leaked key): delete the Secret and run the Job again.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from raybus.bus.security import pem_key, subject_alt_names
from raybus.runtime.settings import CliSettings

CA_DAYS = 3650
CERT_DAYS = 365
CONFIG_WAIT_S = 120.0


@dataclass(frozen=True)
class TlsMaterial:
    ca_crt: bytes
    ca_key: bytes
    tls_crt: bytes
    tls_key: bytes

    def secret_data(self) -> dict[str, str]:
        files = {"ca.crt": self.ca_crt, "ca.key": self.ca_key, "tls.crt": self.tls_crt, "tls.key": self.tls_key}
        return {k: base64.b64encode(v).decode() for k, v in files.items()}

    @classmethod
    def from_secret(cls, data: dict[str, str]) -> TlsMaterial:
        raw = {k: base64.b64decode(v) for k, v in data.items()}
        return cls(raw["ca.crt"], raw["ca.key"], raw["tls.crt"], raw["tls.key"])


def service_hosts(service: str, namespace: str) -> list[str]:
    """The names the API server dials a webhook Service by (<svc>.<ns>.svc), and the longer forms."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def new_ca(now: dt.datetime) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "raybus webhook CA")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), pem_key(key)


def issue(ca_crt: bytes, ca_key: bytes, hosts: list[str], now: dt.datetime) -> TlsMaterial:
    """A serving certificate for `hosts`, signed by the CA."""
    ca = x509.load_pem_x509_certificate(ca_crt)
    signer = serialization.load_pem_private_key(ca_key, password=None)
    assert isinstance(signer, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=CERT_DAYS))
            .add_extension(subject_alt_names(hosts), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(signer, hashes.SHA256()))
    return TlsMaterial(ca_crt, ca_key, cert.public_bytes(serialization.Encoding.PEM), pem_key(key))


def expires_within(tls_crt: bytes, days: float, now: dt.datetime) -> bool:
    cert = x509.load_pem_x509_certificate(tls_crt)
    return cert.not_valid_after_utc - now < dt.timedelta(days=days)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("webhook-secrets", help="the validating webhook's serving certificate and caBundle")
    p.add_argument("--secret", default="raybus-webhook-tls",
                   help="the TLS Secret the webhook serves from (kept; created when missing)")
    p.add_argument("--service", default="raybus-webhook", help="the webhook's Service (the certificate's names)")
    p.add_argument("--webhook-configuration", default="raybus-validating-webhook",
                   help="the ValidatingWebhookConfiguration whose caBundle to set")
    p.add_argument("--host", action="append", default=[], help="another name or IP for the certificate (repeatable)")
    p.add_argument("--renew", action="store_true", help="renew the serving certificate now")
    p.add_argument("--renew-within-days", type=float, default=30.0,
                   help="renew when the certificate expires within this many days (default 30)")
    p.add_argument("--namespace", default=CliSettings().namespace,
                   help="namespace of the Secret and Service (env POD_NAMESPACE; default raybus-system)")
    p.add_argument("--kubeconfig", default=CliSettings().kubeconfig,
                   help="kubeconfig to use (env RAYBUS_KUBECONFIG; default: in-cluster)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from raybus.adapters.kube import KubeError

    try:
        print(asyncio.run(_run(args)), flush=True)
    except KubeError as exc:
        print(f"webhook-secrets: {exc.code} {exc.reason}: {exc}", flush=True)
        return 1
    return 0


async def _run(args: argparse.Namespace) -> str:
    from raybus.adapters.kube import KubeClient, new_api_client

    kube = KubeClient(await new_api_client(args.kubeconfig))
    try:
        material, what = await ensure_secret(kube, args)
        await set_ca_bundle(kube, args.webhook_configuration, material.ca_crt)
    finally:
        await kube.close()
    return (f"Secret {args.namespace}/{args.secret} {what}; caBundle of ValidatingWebhookConfiguration "
            f"{args.webhook_configuration} set")


async def ensure_secret(kube: Any, args: argparse.Namespace) -> tuple[TlsMaterial, str]:
    from raybus.adapters.kube import KubeError, resource_for

    secrets = resource_for("v1", "Secret")
    hosts = [*service_hosts(args.service, args.namespace), *args.host]
    now = dt.datetime.now(dt.UTC)
    try:
        current = await kube.get(secrets, namespace=args.namespace, name=args.secret)
    except KubeError as exc:
        if not exc.not_found:
            raise
        material = issue(*new_ca(now), hosts, now)
        await kube.create(secrets, {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": args.secret, "namespace": args.namespace,
                         "labels": {"app.kubernetes.io/part-of": "raybus"}},
            "data": material.secret_data()}, namespace=args.namespace)
        return material, "created"
    material = TlsMaterial.from_secret(current.get("data") or {})
    if not (args.renew or expires_within(material.tls_crt, args.renew_within_days, now)):
        return material, "kept (valid)"
    material = issue(material.ca_crt, material.ca_key, hosts, now)
    await kube.merge_patch(secrets, namespace=args.namespace, name=args.secret,
                           patch={"data": material.secret_data()})
    return material, "renewed (same CA)"


async def set_ca_bundle(kube: Any, name: str, ca_crt: bytes, *, wait_s: float = CONFIG_WAIT_S) -> None:
    from raybus.adapters.kube import KubeError, Resource

    configs = Resource(group="admissionregistration.k8s.io", version="v1", plural="validatingwebhookconfigurations",
                       kind="ValidatingWebhookConfiguration", namespaced=False)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        try:
            config = await kube.get(configs, namespace=None, name=name)
            break
        except KubeError as exc:
            if not exc.not_found or loop.time() > deadline:
                raise
            await asyncio.sleep(2.0)  # applied by the same `kubectl apply -k`, maybe after this Job
    bundle = base64.b64encode(ca_crt).decode()
    patch = [{"op": "replace" if "caBundle" in (w.get("clientConfig") or {}) else "add",
              "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
             for i, w in enumerate(config.get("webhooks") or [])]
    if patch:
        await kube.request("PATCH", configs.path(name=name), body=patch, content_type="application/json-patch+json")
