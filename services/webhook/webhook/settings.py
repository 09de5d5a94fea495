"""The webhook's settings: flags / RAYBUS_* env (runtime.settings.load)."""

from __future__ import annotations

from pydantic import AliasChoices, Field

from raybus.api.settings import FeatureGates
from raybus.api.validation_webhook import Strictness
from raybus.runtime.settings import NOT_A_FLAG, RaybusSettings

SERVICE = "webhook"


def _env(name: str) -> AliasChoices:
    return AliasChoices(name, f"RAYBUS_WEBHOOK_{name.upper()}")


class WebhookSettings(RaybusSettings):
    service: str = Field(default=SERVICE, json_schema_extra=NOT_A_FLAG)
    # controller-runtime's webhook server: port 9443, the serving certificate as tls.crt / tls.key
    # (a kubernetes.io/tls Secret mounted as files; re-read when they change, so a renewed
    # certificate is served without a restart).
    bind: str = Field(default="0.0.0.0", validation_alias=_env("bind"),
                      description="address to listen on (all interfaces: the API server reaches it through its Service)")
    port: int = Field(default=9443, validation_alias=_env("port"), description="HTTPS port")
    tls_cert_file: str = Field(default="/etc/raybus/webhook/tls.crt", validation_alias=_env("tls_cert_file"),
                               description="serving certificate")
    tls_key_file: str = Field(default="/etc/raybus/webhook/tls.key", validation_alias=_env("tls_key_file"),
                              description="serving certificate's key")
    strictness: Strictness = Field(default=Strictness.KUBERAY, validation_alias=_env("strictness"),
                                   description="kuberay: KubeRay's checks (names, unique worker groups); "
                                   "full: also the operator's whole validation")
    feature_gates: str = Field(default="", description="KubeRay's --feature-gates (full judges what the operator would)")

    def completed(self) -> WebhookSettings:
        FeatureGates.from_flag(self.feature_gates)  # ValueError: KubeRay's operator refuses to start
        return self
