"""`raybus bus-secrets` and `raybus bus-init`: the secured bus's install steps, for compose and the
Kubernetes install (the local stack does both itself).

- `bus-secrets --out DIR [--host H ...]`: TLS material, one password per role, the NATS server's
  `tls`/`authorization` and route `tls` configs and the Redis ACL file, with password hashes only
  (bus/security.py). Existing files are kept.
- `bus-init`: as `bus-admin`, declare every stream and KV bucket; services on a secured bus only
  wait for them (they may not create or change a stream).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from raybus.bus import security
from raybus.bus.connect import BusAuth, nats_options
from raybus.bus.declare import declare_bus
from raybus.bus.streams import BusSettings
from raybus.runtime.settings import CliSettings, CommonSettings


def add_parser(sub: Any) -> None:
    env = CliSettings()
    p = sub.add_parser("bus-secrets", help="generate the bus's TLS material and per-role credentials")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="directory for the CA, certificates, passwords and server configs")
    p.add_argument("--host", action="append", default=[],
                   help="a name or IP the NATS certificate must carry (repeatable; adds to the defaults)")
    p.add_argument("--cert-dir", default=None,
                   help="where the NATS server will find the certificates (e.g. a container mount)")
    p.add_argument("--shared-read", action="store_true",
                   help="files readable by every user (compose: containers of different users share "
                        "one volume); never for an install that can mount per-container items")
    p.add_argument("--k8s-secret", default=None, metavar="NAME",
                   help="also create Secret NAME (flat keys, see docs/security.md) unless it exists: the install's "
                        "raybus-bus-secrets Job")
    p.add_argument("--namespace", default=env.namespace,
                   help="namespace of that Secret (env POD_NAMESPACE; default raybus-system)")
    p.add_argument("--kubeconfig", default=env.kubeconfig,
                   help="kubeconfig for creating it (env RAYBUS_KUBECONFIG; default: in-cluster)")
    p.set_defaults(func=run_secrets)
    q = sub.add_parser("bus-init", help="declare every stream and KV bucket as bus-admin")
    q.add_argument("--nats-url", default=env.nats_url,
                   help="NATS server(s), comma-separated (env RAYBUS_NATS_URL)")
    q.add_argument("--nats-user", default=env.nats_user, help="the bus-admin user (env RAYBUS_NATS_USER)")
    q.add_argument("--nats-password-file", default=env.nats_password_file,
                   help="file holding its password (env RAYBUS_NATS_PASSWORD_FILE)")
    q.add_argument("--nats-ca-file", default=env.nats_ca_file,
                   help="CA that signed the NATS server's certificate (env RAYBUS_NATS_CA_FILE)")
    q.set_defaults(func=run_init)


def run_secrets(args: argparse.Namespace) -> int:
    out = security.generate(args.out, hosts=[*security.DEFAULT_HOSTS, *args.host],
                            shared_read=args.shared_read)
    if args.cert_dir:
        (out / "nats-auth.conf").write_text(security.nats_auth_config(out, cert_dir=args.cert_dir))
        (out / "nats-routes.conf").write_text(security.nats_routes_config(out, cert_dir=args.cert_dir))
    print(f"bus secrets in {out} (passwords are never printed)")
    if args.k8s_secret:
        import asyncio
        created = asyncio.run(_create_secret(out, args.k8s_secret, args.namespace, args.kubeconfig))
        print(f"Secret {args.namespace}/{args.k8s_secret} " + ("created" if created else "kept (exists)"))
    return 0


def secret_data(out: Path) -> dict[str, str]:
    """The Secret's keys: flat names, so each Pod mounts only the items it needs (its own password)."""
    import base64

    files = {name: out / name for name in ("ca.pem", "server.pem", "server-key.pem", "redis.pem", "redis-key.pem",
                                           "nats-auth.conf", "nats-routes.conf", "redis-users.acl")}
    for user in sorted((out / "users").iterdir()):
        key = user.name if user.name.startswith("redis-") else f"nats-{user.name}"
        files[key] = user
    return {k: base64.b64encode(v.read_bytes()).decode() for k, v in files.items()}


async def _create_secret(out: Path, name: str, namespace: str, kubeconfig: str | None) -> bool:
    """Create-if-absent: a re-run (the Job after `kubectl apply -k` again) keeps the credentials the
    running services use; rotating them is deleting the Secret and rolling the install."""
    from raybus.adapters.kube import KubeClient, KubeError, new_api_client, resource_for

    kube = KubeClient(await new_api_client(kubeconfig))
    try:
        await kube.create(resource_for("v1", "Secret"), {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "raybus"}},
            "data": secret_data(out)}, namespace=namespace)
        return True
    except KubeError as e:
        if e.code == 409:
            return False
        raise
    finally:
        await kube.close()


def run_init(args: argparse.Namespace) -> int:
    auth = BusAuth(nats_user=args.nats_user, nats_password_file=args.nats_password_file,
                   nats_ca_file=args.nats_ca_file)
    asyncio.run(declare_bus(nats_options(args.nats_url, auth), BusSettings(replicas=CommonSettings().stream_replicas)))
    print("bus declared", flush=True)
    return 0
