"""Liveness/readiness probes KubeRay injects into the Ray container (initLivenessAndReadinessProbe)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from raybus.api.k8s_names import parse_generic_version
from raybus.decisions.cluster import labels as k

UNIFIED_HEALTH_CHECK_MIN_VERSION = (2, 53, 0)


def supports_unified_health_check(ray_version: str | None) -> bool:
    """supportsUnifiedHealthCheck: Ray >= 2.53.0 serves one HTTP health endpoint (kuberay#4448)."""
    try:
        parsed = parse_generic_version(ray_version or "")
    except ValueError:
        return False
    width = max(len(parsed), len(UNIFIED_HEALTH_CHECK_MIN_VERSION))
    padded = parsed + (0,) * (width - len(parsed))
    minimum = UNIFIED_HEALTH_CHECK_MIN_VERSION + (0,) * (width - len(UNIFIED_HEALTH_CHECK_MIN_VERSION))
    return padded >= minimum


def _port(params: Mapping[str, str], key: str, default: int) -> int:
    """getPort: rayStartParams[key] if it parses as an int32, else the default."""
    raw = params.get(key)
    if raw is not None and re.fullmatch(r"[+-]?\d+", raw):
        value = int(raw)
        if -(2**31) <= value < 2**31:
            return value
    return default


def find_container_port(container: Mapping[str, Any], name: str, *, default: int) -> int:
    """utils.FindContainerPort."""
    for port in container.get("ports") or []:
        if port.get("name") == name:
            return int(port.get("containerPort", 0))
    return default


def _wget(timeout: int, port: int, path: str) -> str:
    return k.BASE_WGET_HEALTH_COMMAND.format(timeout=timeout, port=port, path=path)


def init_liveness_and_readiness_probe(
    container: dict[str, Any],
    *,
    node_type: str,
    creator_crd_type: str,
    params: Mapping[str, str],
    ray_version: str | None,
) -> None:
    """Fill in missing probes: HTTP GET on the unified endpoint for Ray >= 2.53, else ``bash -c wget``
    checks (raylet; plus GCS on the head). RayService workers' readiness also checks the Serve proxy."""
    agent_port = _port(params, "dashboard-agent-listen-port", k.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT)
    http_check = supports_unified_health_check(ray_version)
    http_action = {"path": k.RAY_NODE_HEALTH_PATH, "port": agent_port}
    raylet = _wget(k.DEFAULT_READINESS_PROBE_TIMEOUT_SECONDS, agent_port, k.RAY_AGENT_RAYLET_HEALTH_PATH)
    # KubeRay passes DefaultReadinessProbeFailureThreshold (10) as the GCS wget timeout; kept as is.
    gcs = _wget(
        k.DEFAULT_READINESS_PROBE_FAILURE_THRESHOLD,
        _port(params, "dashboard-port", k.DEFAULT_DASHBOARD_PORT),
        k.RAY_DASHBOARD_GCS_HEALTH_PATH,
    )
    commands = [raylet, gcs] if node_type == k.HEAD_NODE else [raylet]
    is_head = node_type == k.HEAD_NODE

    if container.get("livenessProbe") is None:
        probe: dict[str, Any] = {
            "initialDelaySeconds": k.DEFAULT_LIVENESS_PROBE_INITIAL_DELAY_SECONDS,
            "timeoutSeconds": (
                k.DEFAULT_HEAD_LIVENESS_PROBE_TIMEOUT_SECONDS
                if is_head
                else k.DEFAULT_LIVENESS_PROBE_TIMEOUT_SECONDS
            ),
            "periodSeconds": k.DEFAULT_LIVENESS_PROBE_PERIOD_SECONDS,
            "successThreshold": k.DEFAULT_LIVENESS_PROBE_SUCCESS_THRESHOLD,
            "failureThreshold": k.DEFAULT_LIVENESS_PROBE_FAILURE_THRESHOLD,
        }
        if http_check:
            probe["httpGet"] = dict(http_action)
        else:
            probe["exec"] = {"command": ["bash", "-c", " && ".join(commands)]}
        container["livenessProbe"] = probe

    if container.get("readinessProbe") is None:
        probe = {
            "initialDelaySeconds": k.DEFAULT_READINESS_PROBE_INITIAL_DELAY_SECONDS,
            "timeoutSeconds": (
                k.DEFAULT_HEAD_READINESS_PROBE_TIMEOUT_SECONDS
                if is_head
                else k.DEFAULT_READINESS_PROBE_TIMEOUT_SECONDS
            ),
            "periodSeconds": k.DEFAULT_READINESS_PROBE_PERIOD_SECONDS,
            "successThreshold": k.DEFAULT_READINESS_PROBE_SUCCESS_THRESHOLD,
            "failureThreshold": k.DEFAULT_READINESS_PROBE_FAILURE_THRESHOLD,
        }
        if http_check:
            probe["httpGet"] = dict(http_action)
        else:
            probe["exec"] = {"command": ["bash", "-c", " && ".join(commands)]}
        # Serving workers: readiness also checks the HTTP proxy (kuberay#1808); the head's proxy is
        # checked by the RayService controller instead. Always an exec probe.
        if creator_crd_type == k.RAY_SERVICE_CRD and node_type == k.WORKER_NODE:
            probe["failureThreshold"] = k.SERVE_READINESS_PROBE_FAILURE_THRESHOLD
            serve = _wget(
                k.DEFAULT_READINESS_PROBE_INITIAL_DELAY_SECONDS,
                find_container_port(container, k.SERVING_PORT_NAME, default=k.DEFAULT_SERVING_PORT),
                k.RAY_SERVE_PROXY_HEALTH_PATH,
            )
            probe.pop("httpGet", None)
            probe["exec"] = {"command": ["bash", "-c", " && ".join([*commands, serve])]}
        container["readinessProbe"] = probe
