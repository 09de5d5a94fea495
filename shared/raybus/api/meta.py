"""Base model and Kubernetes metadata shared by every ray.io/v1 kind.

Conventions (other services rely on them):
- Python attributes are snake_case of KubeRay's json tags; ``alias_generator=to_camel`` produces the
  wire name, explicit aliases cover tags to_camel cannot produce (``desiredCPU``, ``podIP`` ...).
- ``extra="allow"``: fields we do not model (newer KubeRay versions, typos the API server would
  prune) survive a parse/dump round trip instead of being silently dropped.
- Embedded Kubernetes objects (pod templates, Services, env, resources ...) are plain
  ``dict[str, Any]``: we never want to re-model corev1 and lose a field.
- Parsing never injects defaults (all optional fields default to ``None``) so ``to_manifest()`` is
  lossless; KubeRay's defaulting lives in :mod:`raybus.api.defaults`.
- Timestamps are kept as the RFC3339 strings the API server sends (metav1.Time); converting to
  ``datetime`` would re-format them and break exact round trips.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# A Kubernetes sub-object we pass through untouched (PodTemplateSpec, Service, EnvVar ...).
K8sObject = dict[str, Any]
# resource.Quantity: the API server accepts both "1Gi" and 1 / 0.5 in JSON.
Quantity = str | int | float

GROUP = "ray.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"


class RayModel(BaseModel):
    """Base for every API model: camelCase on the wire, snake_case in Python, unknown fields kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        validate_assignment=False,
        serialize_by_alias=True,
    )

    def to_dict(self) -> dict[str, Any]:
        """camelCase dict holding only the fields that were set (parsed or passed explicitly)."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls.model_validate(data)


class OwnerReference(RayModel):
    api_version: str | None = Field(default=None, alias="apiVersion")
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(RayModel):
    """metav1.ObjectMeta, the fields controllers read; everything else survives via extra="allow"."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[K8sObject] | None = None


class Condition(RayModel):
    """metav1.Condition as used in RayCluster/RayService status.conditions."""

    type: str
    status: str
    observed_generation: int | None = None
    last_transition_time: str | None = None
    reason: str | None = None
    message: str | None = None


class RayObject(RayModel):
    """Fields common to every top-level ray.io/v1 object."""

    api_version: str | None = Field(default=API_VERSION, alias="apiVersion")
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def to_manifest(self) -> dict[str, Any]:
        """camelCase manifest; exact round trip of parsed input. apiVersion/kind are always emitted
        because a manifest without them cannot be applied."""
        body = self.to_dict()
        head = {"apiVersion": self.api_version or API_VERSION, "kind": self.kind or type(self).__name__}
        body.pop("apiVersion", None)
        body.pop("kind", None)
        return {**head, **body}

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        return self.metadata.namespace or ""
