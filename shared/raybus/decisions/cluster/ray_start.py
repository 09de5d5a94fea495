"""The ``ray start`` command KubeRay generates (common/pod.go).

Functions named after their Go counterparts mutate the ``params`` dict they are given, exactly as
the Go code mutates the group's ``rayStartParams`` map; pod builders pass a private copy.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, MutableMapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

from raybus.decisions.cluster import labels as k

_QUANTITY_RE = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_MIG_RE = re.compile(r"nvidia\.com/mig-\d+g\.\d+gb$")
# convertParamMap: flags that take an explicit boolean value instead of being on/off switches.
SPECIAL_PARAMETER_OPTIONS = ("log-color", "include-dashboard", "include-log-monitor")


def parse_quantity(raw: object) -> Fraction | None:
    """resource.ParseQuantity as an exact number; None when unparseable (or a bool)."""
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, int):
        return Fraction(raw)
    if isinstance(raw, float):
        return Fraction(repr(raw))
    match = _QUANTITY_RE.match(str(raw).strip())
    if not match:
        return None
    number, exponent, suffix = match.groups()
    value = Fraction(Decimal(number))
    if exponent:
        return value * Fraction(10) ** int(exponent[1:])
    if suffix in _BINARY:
        return value * Fraction(1024 ** _BINARY[suffix])
    scale: Fraction = Fraction(10) ** _DECIMAL[suffix or ""]
    return value * scale


def quantity_value(raw: object) -> int:
    """Quantity.Value(): rounded up (away from zero) to an integer; 0 when absent/unparseable."""
    q = parse_quantity(raw)
    if q is None:
        return 0
    return math.ceil(q) if q >= 0 else math.floor(q)


def quantity_is_zero(raw: object) -> bool:
    q = parse_quantity(raw)
    return q is None or q == 0


def go_json_float(value: float) -> str:
    """encoding/json's float64 encoding (shortest repr; 'e' form outside [1e-6, 1e21))."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"unsupported value {value}")
    if value == 0:
        return "0"
    if 1e-6 <= abs(value) < 1e21:
        text = format(Decimal(repr(value)).normalize(), "f")
        return text
    text = repr(value)
    mant, _, exp = text.partition("e")
    if exp.startswith("-0") and len(exp) == 3:
        exp = "-" + exp[2]
    return f"{mant}e{exp}"


def go_json_float_map(values: Mapping[str, float]) -> str:
    """json.Marshal(map[string]float64): keys sorted, compact, HTML-escaped like Go."""
    parts = []
    for key in sorted(values):
        name = json.dumps(key, ensure_ascii=False)
        name = name.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        parts.append(f"{name}:{go_json_float(values[key])}")
    return "{" + ",".join(parts) + "}"


def is_gpu_resource_key(key: str) -> bool:
    """utils.IsGPUResourceKey: ``*gpu`` or an NVIDIA MIG profile (``nvidia.com/mig-1g.5gb``)."""
    return key.endswith("gpu") or _MIG_RE.search(key) is not None


def get_head_port(head_params: Mapping[str, str]) -> str:
    """GetHeadPort: rayStartParams["port"], else the default GCS port 6379."""
    return head_params.get("port", str(k.DEFAULT_GCS_SERVER_PORT))


def convert_param_map(params: Mapping[str, str]) -> str:
    """convertParamMap: sorted `` --flag `` switches / `` --key=value `` options.

    "true"/"false" values (any case) become a bare switch (or nothing), except for the flags in
    SPECIAL_PARAMETER_OPTIONS which always get ``=value``.
    """
    out = []
    for option in sorted(params):
        argument = params[option]
        if argument.lower() in ("true", "false") and option not in SPECIAL_PARAMETER_OPTIONS:
            if argument.lower() == "true":
                out.append(f" --{option} ")
        else:
            out.append(f" --{option}={argument} ")
    return "".join(out)


def set_missing_ray_start_params(
    params: MutableMapping[str, str], *, node_type: str, head_port: str, fqdn_ray_ip: str
) -> MutableMapping[str, str]:
    """setMissingRayStartParams: address (worker), dashboard-host (head), metrics port, block, agent port."""
    if node_type == k.WORKER_NODE and "address" not in params:
        params["address"] = f"{fqdn_ray_ip}:{head_port}"
    if node_type == k.HEAD_NODE and "dashboard-host" not in params:
        params["dashboard-host"] = "0.0.0.0"
    params.setdefault("metrics-export-port", str(k.DEFAULT_METRICS_PORT))
    params["block"] = "true"  # always forced (kuberay#675)
    params.setdefault("dashboard-agent-listen-port", str(k.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT))
    return params


def _resources_map(params: Mapping[str, str]) -> dict[str, float] | None:
    """getResourcesMap: the JSON in rayStartParams["resources"] (quotes trimmed); None if invalid."""
    raw = params.get("resources")
    if raw is None:
        return {}
    try:
        parsed = json.loads(raw.strip("'\"` "))
    except ValueError:
        return None
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        return None
    out: dict[str, float] = {}
    for key, value in parsed.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        out[key] = float(value)
    return out


def add_well_known_accelerator_resources(params: MutableMapping[str, str], limits: Mapping[str, Any]) -> bool:
    """addWellKnownAcceleratorResources: num-gpus from GPU-like limits, first custom accelerator.

    Returns False where KubeRay logs an error (invalid ``resources`` JSON): nothing is added then.
    """
    if not limits:
        return True
    resources = _resources_map(params)
    if resources is None:
        return False
    custom_added = any(name in resources for name in k.CUSTOM_ACCELERATOR_TO_RAY_RESOURCE.values())
    for key in sorted(limits):
        value = limits[key]
        if "num-gpus" not in params and is_gpu_resource_key(key) and not quantity_is_zero(value):
            params["num-gpus"] = str(quantity_value(value))
        ray_name = k.CUSTOM_ACCELERATOR_TO_RAY_RESOURCE.get(key)
        if not custom_added and ray_name is not None and not quantity_is_zero(value):
            if ray_name not in resources:
                q = parse_quantity(value)
                resources[ray_name] = float(q) if q is not None else 0.0
                params["resources"] = f"'{go_json_float_map(resources)}'"
            custom_added = True
    return True


def generate_ray_start_command(
    node_type: str, params: MutableMapping[str, str], *, resources: Mapping[str, Any]
) -> str:
    """generateRayStartCommand: num-cpus (limits, then requests), memory (limits only), accelerators."""
    limits: Mapping[str, Any] = resources.get("limits") or {}
    requests: Mapping[str, Any] = resources.get("requests") or {}
    if "num-cpus" not in params:
        if not quantity_is_zero(limits.get("cpu")):
            params["num-cpus"] = str(quantity_value(limits.get("cpu")))
        elif not quantity_is_zero(requests.get("cpu")):
            params["num-cpus"] = str(quantity_value(requests.get("cpu")))
    if "memory" not in params and not quantity_is_zero(limits.get("memory")):
        params["memory"] = str(quantity_value(limits.get("memory")))
    add_well_known_accelerator_resources(params, limits)
    if node_type == k.HEAD_NODE:
        return f"ray start --head {convert_param_map(params)}"
    if node_type == k.WORKER_NODE:
        return f"ray start {convert_param_map(params)}"
    return ""  # KubeRay logs "a node must be either head or worker"


def update_ray_start_params_labels(
    params: MutableMapping[str, str], group_labels: Mapping[str, str] | None
) -> None:
    """updateRayStartParamsLabels: ``--labels=k1=v1,k2=v2`` (sorted) from the group's ``labels``."""
    if not group_labels:
        return
    params["labels"] = ",".join(f"{key}={group_labels[key]}" for key in sorted(group_labels))


def update_ray_start_params_resources(
    params: MutableMapping[str, str], group_resources: Mapping[str, str] | None
) -> None:
    """updateRayStartParamsResources: the group's ``resources`` override num-cpus/memory/num-gpus and
    replace ``--resources`` with the remaining (custom) resources as JSON. Unparseable entries are skipped.
    """
    if not group_resources:
        return
    custom: dict[str, float] = {}
    for name, quantity in group_resources.items():
        q = parse_quantity(quantity)
        if q is None:
            continue
        normalized = name.lower()
        if normalized == "cpu":
            params["num-cpus"] = str(quantity_value(quantity))
        elif normalized == "memory":
            params["memory"] = str(quantity_value(quantity))
        elif is_gpu_resource_key(normalized):
            params["num-gpus"] = str(quantity_value(quantity))
        else:
            custom[name] = float(q)
    if custom:
        params["resources"] = f"'{go_json_float_map(custom)}'"


def convert_cmd_to_string(parts: list[str]) -> str:
    """convertCmdToString: every element wrapped in single spaces."""
    return "".join(f" {part} " for part in parts)


def container_command(*, login_shell: bool, additional_options: str = "") -> list[str]:
    """utils.GetContainerCommand: ``/bin/bash -c<options> --``, with ``l`` appended under
    ENABLE_LOGIN_SHELL=true (``-cl``, ``-cel``: KubeRay's TestGetContainerCommand)."""
    return ["/bin/bash", "-c" + additional_options + ("l" if login_shell else ""), "--"]


def ulimit_command() -> str:
    """BuildPod's open-files limit (kuberay#4860): overridable per container at runtime."""
    return f"ulimit -n ${{{k.RAY_START_ULIMIT_OPEN_FILES}:-65536}}"
