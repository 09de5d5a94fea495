"""`raybus config [SERVICE]`: the configuration a service would run with here (its flags' defaults,
the RAYBUS_* environment and secret files), secrets redacted."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pydantic import ValidationError

from raybus.runtime.settings import effective, kuberay_env_effective
from raybus.runtime.settings_reference import DECIDING, SERVICES, settings_class


def add_parser(sub: Any) -> None:
    p = sub.add_parser("config", help="print the effective configuration of a service (secrets redacted)")
    p.add_argument("service", nargs="?", choices=list(SERVICES), help="one service (default: all)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out: dict[str, Any] = {}
    for service in [args.service] if args.service else list(SERVICES):
        try:
            values = effective(settings_class(service)(service=service))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            print(f"raybus config: {service}: {problems}")
            return 2
        if service in DECIDING:
            values["kuberay_env"] = kuberay_env_effective()
        out[service] = values
    print(json.dumps(out, indent=2, sort_keys=False))
    return 0
