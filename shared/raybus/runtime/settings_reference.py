"""Which settings model each service loads, and the configuration reference generated from them
(docs/configuration.md; tests/unit/runtime/test_settings_reference.py fails when it drifts)."""

from __future__ import annotations

import importlib
from typing import Any

from pydantic.fields import FieldInfo

from raybus.runtime.settings import (
    CommonSettings,
    KubeRayEnv,
    RaybusSettings,
    env_name,
    flag_name,
    is_secret,
)

# service -> "module:class" of its settings (imported on demand: the services are their own packages).
SERVICES: dict[str, str] = {
    "watcher": "watcher.app:WatcherSettings",
    "command-executor": "command_executor.app:ExecutorSettings",
    "cluster-reconciler": "raybus.runtime.settings:ReconcilerSettings",
    "job-reconciler": "raybus.runtime.settings:ReconcilerSettings",
    "service-reconciler": "raybus.runtime.settings:ReconcilerSettings",
    "dashboard-poller": "dashboard_poller.settings:PollerSettings",
    "webhook": "webhook.settings:WebhookSettings",
}
# The processes that decide or re-check decisions: they read KubeRay's variables (KubeRayEnv).
DECIDING = ("command-executor", "cluster-reconciler", "job-reconciler", "service-reconciler")


def settings_class(service: str) -> type[RaybusSettings]:
    module, _, name = SERVICES[service].partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, RaybusSettings)
    return cls


def _default(field: FieldInfo) -> str:
    if is_secret(field):
        return "(secret)"
    value: Any = field.get_default(call_default_factory=True)
    if hasattr(value, "value"):
        value = value.value
    return "" if value is None else f"`{value}`"


def _rows(cls: type[RaybusSettings], names: list[str]) -> list[str]:
    out = ["| flag | variable | default | meaning |", "| --- | --- | --- | --- |"]
    for name in names:
        field = cls.model_fields[name]
        flag = flag_name(name, field)
        if flag is None:
            continue
        text = (field.description or "").replace("|", "\\|")
        out.append(f"| `{flag}` | `{env_name(name, field)}` | {_default(field)} | {text} |")
    return out


def reference() -> str:
    lines = ["# Configuration", "",
             "Generated from the settings models (`raybus.runtime.settings`, each service's own model);",
             "`make test` fails when this file and the models differ. Regenerate with",
             "`python -m raybus.runtime.settings_reference > docs/configuration.md`.", "",
             "Each setting is read from, in order: its flag, its environment variable, a file named like",
             "the variable (lower case) in `/etc/raybus/secrets` (a mounted Secret), its default. A bad",
             "value stops the process with one line naming the flag and the variable.",
             "`raybus config [SERVICE]` prints what a process would run with, secrets redacted.", ""]
    base = list(RaybusSettings.model_fields)
    common = [n for n in CommonSettings.model_fields if n not in base]
    lines += ["## Every service", ""] + _rows(RaybusSettings, base) + [""]
    lines += ["## Every service on the bus (all but the webhook)", ""] + _rows(CommonSettings, common) + [""]
    seen: set[str] = set()
    for service, target in SERVICES.items():
        if target in seen:
            continue
        seen.add(target)
        cls = settings_class(service)
        names = [s for s, t in SERVICES.items() if t == target]
        own = [n for n in cls.model_fields if n not in CommonSettings.model_fields]
        lines += [f"## {', '.join(names)}", ""] + _rows(cls, own) + [""]
    lines += ["## KubeRay's variables", "",
              f"Read under KubeRay's own names by {', '.join(DECIDING)} (one model, `KubeRayEnv`, so",
              "that admission and the reconcilers agree); the install feeds them from the",
              "`raybus-operator-env` ConfigMap.", "", "| variable | meaning |", "| --- | --- |"]
    for name, field in KubeRayEnv.model_fields.items():
        lines.append(f"| `{name}` | {(field.description or '').replace('|', chr(92) + '|')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
