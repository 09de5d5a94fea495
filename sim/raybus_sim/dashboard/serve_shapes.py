"""Builders for the Serve details JSON (`GET /api/serve/applications/`), shaped like the captures.

Key sets and default values are copied from 111_serve_v1_poll_final (Serve running) and
01_serve_applications_before_serve_started (only 4 keys before Serve starts / after shutdown).
"""

from __future__ import annotations

import hashlib
from typing import Any

from raybus_sim.dashboard import texts
from raybus_sim.dashboard.jobs import NODE_ID

EMPTY_DETAILS: dict[str, Any] = {
    "controller_info": {},
    "proxies": {},
    "applications": {},
    "target_capacity": None,
}


def _hex(seed: str, n: int) -> str:
    out = ""
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}/{i}".encode()).hexdigest()
        i += 1
    return out[:n]


def _actor(seed: str, *, name: str, log: str) -> dict[str, Any]:
    return {
        "node_id": NODE_ID,
        "node_ip": texts.NODE_IP,
        "node_instance_id": "",
        "actor_id": _hex(seed + "a", 24) + "01000000",
        "actor_name": name,
        "worker_id": _hex(seed + "w", 56),
        "log_file_path": log,
    }


def controller_info(session: str) -> dict[str, Any]:
    return _actor(session + "ctl", name="SERVE_CONTROLLER_ACTOR", log="/serve/controller_14199.log")


def proxies(session: str, status: str) -> dict[str, Any]:
    proxy = _actor(
        session + "proxy", name=f"SERVE_PROXY_ACTOR-{NODE_ID}", log=f"/serve/proxy_{texts.NODE_IP}.log"
    )
    proxy["status"] = status
    return {NODE_ID: proxy}


def http_options(given: dict[str, Any]) -> dict[str, Any]:
    return {
        "host": given.get("host", "0.0.0.0"),
        "port": given.get("port", 8000),
        "root_path": given.get("root_path", ""),
        "request_timeout_s": given.get("request_timeout_s"),
        "keep_alive_timeout_s": given.get("keep_alive_timeout_s", 90),
        "ssl_keyfile": None,
        "ssl_certfile": None,
        "ssl_keyfile_password": None,
        "ssl_ca_certs": None,
    }


GRPC_OPTIONS: dict[str, Any] = {
    "port": 9000,
    "grpc_servicer_functions": [],
    "request_timeout_s": None,
    "enable_reflection": True,
}


def target_groups(port: int) -> list[dict[str, Any]]:
    target = {"ip": texts.NODE_IP, "port": port, "instance_id": "", "name": f"SERVE_PROXY_ACTOR-{NODE_ID}"}
    return [
        {
            "targets": [target],
            "route_prefix": "/",
            "protocol": "HTTP",
            "app_name": "",
            "ingress_request_router_targets": [],
            "ingress_deployment_name": "",
        }
    ]


def _stats() -> dict[str, float]:
    return {"mean": 0.01, "std": 0.02, "min": 0.001, "max": 0.1}


def controller_health_metrics(now: float, started_at: float) -> dict[str, Any]:
    return {
        "timestamp": now,
        "controller_start_time": started_at,
        "uptime_s": now - started_at,
        "last_control_loop_time": now,
        "num_control_loops": int((now - started_at) * 10),
        "loop_duration_s": _stats(),
        "loops_per_second": 8.7,
        "last_sleep_duration_s": 0.1,
        "expected_sleep_duration_s": 0.1,
        "event_loop_delay_s": 0.0005,
        "num_asyncio_tasks": 10,
        "handle_ingest_duration_ms": {},
        "replica_ingest_duration_ms": {},
        "metrics_decompress_duration_ms": {},
        "columnar_decode_duration_ms": {},
        "handle_reports_received": 0,
        "replica_reports_received": 0,
        "ingest_reports_received": 0,
        "ingest_cpu_fraction": 0.0,
        "deployment_state_update_duration_s": _stats(),
        "application_state_update_duration_s": _stats(),
        "proxy_state_update_duration_s": _stats(),
        "node_update_duration_s": _stats(),
        "handle_metrics_delay_ms": {},
        "replica_metrics_delay_ms": {},
        "process_memory_mb": 156.0,
    }


def deployment_config(name: str, app_cfg: dict[str, Any], dep_cfg: dict[str, Any]) -> dict[str, Any]:
    actor_options = dict(dep_cfg.get("ray_actor_options") or {})
    actor_options.setdefault("runtime_env", dict(app_cfg.get("runtime_env") or {}))
    actor_options.setdefault("num_cpus", 0.1)
    return {
        "name": name,
        "num_replicas": dep_cfg.get("num_replicas", 1),
        "max_ongoing_requests": dep_cfg.get("max_ongoing_requests", 5),
        "max_queued_requests": dep_cfg.get("max_queued_requests", -1),
        "backpressure_config": {"status_code": 503, "retry_after_s": None},
        "user_config": dep_cfg.get("user_config"),
        "graceful_shutdown_wait_loop_s": dep_cfg.get("graceful_shutdown_wait_loop_s", 2.0),
        "graceful_shutdown_timeout_s": dep_cfg.get("graceful_shutdown_timeout_s", 20.0),
        "health_check_period_s": dep_cfg.get("health_check_period_s", 10.0),
        "health_check_timeout_s": dep_cfg.get("health_check_timeout_s", 30.0),
        "ray_actor_options": actor_options,
        "request_router_config": {
            "request_router_class": "ray.serve._private.request_router:PowerOfTwoChoicesRequestRouter",
            "request_router_kwargs": {},
            "request_routing_stats_period_s": 10.0,
            "request_routing_stats_timeout_s": 30.0,
            "initial_backoff_s": 0.025,
            "backoff_multiplier": 2.0,
            "max_backoff_s": 0.5,
        },
        "rolling_update_percentage": 0.2,
        "max_surge_percent": 0,
    }


def replica(app: str, dep: str, *, seed: str, state: str, started: float) -> dict[str, Any]:
    rid = _hex(seed, 8)
    out = _actor(seed, name=f"SERVE_REPLICA::{app}#{dep}#{rid}", log=f"/serve/replica_{app}_{dep}_{rid}.log")
    out.update(
        {"replica_id": rid, "state": state, "pid": 14000 + int(rid[:3], 16) % 1000, "start_time_s": started}
    )
    return out


def deployment(
    app: str,
    name: str,
    *,
    cfg: dict[str, Any],
    status: str,
    trigger: str,
    message: str,
    replicas: list[dict[str, Any]],
    dead: list[dict[str, Any]],
) -> dict[str, Any]:
    num = int(cfg["num_replicas"]) if isinstance(cfg.get("num_replicas"), int) else 1
    cpus = float(cfg["ray_actor_options"].get("num_cpus", 0.1))
    return {
        "name": name,
        "status": status,
        "status_trigger": trigger,
        "message": message,
        "deployment_config": cfg,
        "target_num_replicas": num,
        "required_resources": {"CPU": cpus},
        "replicas": replicas,
        "recent_dead_replicas": dead,
    }


def topology(app: str, names: list[str]) -> dict[str, Any]:
    """First deployment is the ingress and calls the others (like app2's Ingress -> Greeter)."""
    nodes = {
        name: {
            "name": name,
            "app_name": app,
            "outbound_deployments": [{"name": n, "app_name": app} for n in names[1:]] if i == 0 else [],
            "is_ingress": i == 0,
        }
        for i, name in enumerate(names)
    }
    return {"app_name": app, "nodes": nodes, "ingress_deployment": names[0]}


def redact_env_vars(value: Any) -> Any:
    """185_serve_GET_browser_user_agent_redaction: browsers see env var values as "<redacted>"."""
    if isinstance(value, dict):
        return {
            k: (
                {ek: "<redacted>" for ek in v}
                if k == "env_vars" and isinstance(v, dict)
                else redact_env_vars(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_env_vars(v) for v in value]
    return value
