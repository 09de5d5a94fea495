"""The webhook's settings (flags / RAYBUS_* env in __main__)."""

from __future__ import annotations

from raybus.api.validation_webhook import Strictness
from raybus.runtime.service import CommonSettings

SERVICE = "webhook"


class WebhookSettings(CommonSettings):
    service: str = SERVICE
    # controller-runtime's webhook server: port 9443, the serving certificate as tls.crt / tls.key
    # (a kubernetes.io/tls Secret mounted as files; re-read when they change, so a renewed
    # certificate is served without a restart).
    bind: str = "0.0.0.0"  # all interfaces: the API server reaches it through its Service
    port: int = 9443
    tls_cert_file: str = "/etc/raybus/webhook/tls.crt"
    tls_key_file: str = "/etc/raybus/webhook/tls.key"
    strictness: Strictness = Strictness.KUBERAY
    feature_gates: str = ""  # KubeRay's --feature-gates (FULL judges what the operator would)
