"""`raybus bus-secrets` and `raybus bus-init`: the secured bus's install steps, for compose and the
Kubernetes install (the local stack does both itself).

- `bus-secrets --out DIR [--host H ...]`: TLS material, one password per role, the NATS server's
  `tls`/`authorization` config and the Redis ACL file (bus/security.py). Existing files are kept.
- `bus-init`: as `bus-admin`, declare every stream and KV bucket; services on a secured bus only
  wait for them (they may not create or change a stream).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from raybus.bus import security
from raybus.bus.connect import BusAuth, nats_options


def add_parser(sub: Any) -> None:
    p = sub.add_parser("bus-secrets", help="generate the bus's TLS material and per-role credentials")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--host", action="append", default=[],
                   help="a name or IP the NATS certificate must carry (repeatable; adds to the defaults)")
    p.add_argument("--cert-dir", default=None,
                   help="where the NATS server will find the certificates (e.g. a container mount)")
    p.set_defaults(func=run_secrets)
    q = sub.add_parser("bus-init", help="declare every stream and KV bucket as bus-admin")
    q.add_argument("--nats-url", default=os.environ.get("RAYBUS_NATS_URL", "nats://127.0.0.1:4222"))
    q.add_argument("--nats-user", default=os.environ.get("RAYBUS_NATS_USER"))
    q.add_argument("--nats-password-file", default=os.environ.get("RAYBUS_NATS_PASSWORD_FILE"))
    q.add_argument("--nats-ca-file", default=os.environ.get("RAYBUS_NATS_CA_FILE"))
    q.set_defaults(func=run_init)


def run_secrets(args: argparse.Namespace) -> int:
    out = security.generate(args.out, hosts=[*security.DEFAULT_HOSTS, *args.host])
    if args.cert_dir:
        (out / "nats-auth.conf").write_text(security.nats_auth_config(out, cert_dir=args.cert_dir))
    print(f"bus secrets in {out} (passwords are never printed)")
    return 0


def run_init(args: argparse.Namespace) -> int:
    from raybus.cli.stack import declare_bus

    auth = BusAuth(nats_user=args.nats_user, nats_password_file=args.nats_password_file,
                   nats_ca_file=args.nats_ca_file)
    declare_bus(nats_options(args.nats_url, auth))
    print("bus declared", flush=True)
    return 0
