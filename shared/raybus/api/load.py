"""Parse ray.io/v1 manifests (multi-document YAML or dicts) into typed models."""

from __future__ import annotations

from typing import Any

import yaml

from raybus.api.meta import GROUP
from raybus.api.raycluster import RayCluster
from raybus.api.raycronjob import RayCronJob
from raybus.api.rayjob import RayJob
from raybus.api.rayservice import RayService

RayAny = RayCluster | RayJob | RayService | RayCronJob

KINDS: dict[str, type[RayCluster | RayJob | RayService | RayCronJob]] = {
    "RayCluster": RayCluster,
    "RayJob": RayJob,
    "RayService": RayService,
    "RayCronJob": RayCronJob,
}


class NotARayObject(ValueError):
    """The dict is not a ray.io object of a kind we model."""


def is_ray_object(doc: object) -> bool:
    if not isinstance(doc, dict):
        return False
    api_version = doc.get("apiVersion")
    group = api_version.split("/", 1)[0] if isinstance(api_version, str) else None
    # A missing apiVersion is tolerated (fixtures, partial docs); a foreign group is not ours.
    return doc.get("kind") in KINDS and group in (None, GROUP)


def parse_object(doc: dict[str, Any]) -> RayAny:
    """Parse one manifest dict by its ``kind``; raises NotARayObject for other kinds."""
    if not is_ray_object(doc):
        raise NotARayObject(f"not a ray.io object: apiVersion={doc.get('apiVersion')!r} kind={doc.get('kind')!r}")
    return KINDS[doc["kind"]].model_validate(doc)


def parse_manifests(text: str) -> list[RayAny]:
    """Every Ray object in a multi-document YAML string, in order; other kinds are skipped."""
    return [parse_object(doc) for doc in yaml.safe_load_all(text) if is_ray_object(doc)]
