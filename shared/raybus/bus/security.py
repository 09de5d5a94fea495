"""The bus's credentials and TLS material, generated in one place (`raybus bus-secrets`) for the
local stack (`.raybus/secrets/`), compose and the Kubernetes install.

Layout of a secrets directory:

    ca.pem, ca-key.pem          a private CA (the install's own; clients trust only it)
    server.pem, server-key.pem  NATS's serving certificate (SANs: the hosts given)
    users/<role>                one password per bus role (bus/permissions.py), 0600
    nats-auth.conf              NATS `authorization` + `tls` blocks, included by the server config
    redis-users.acl             Redis ACL users (reconcilers that keep state, and an admin)

Passwords are random per install and never derived; nothing here is logged. Re-running keeps an
existing directory's files (a restarted `make run` must keep the credentials its services use).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from raybus.bus.permissions import Role, permissions

DEFAULT_HOSTS = ("127.0.0.1", "localhost", "nats", "raybus-nats", "*.raybus-nats",
                 "raybus-nats.raybus-system.svc", "*.raybus-nats.raybus-system.svc",
                 "*.raybus-nats.raybus-system.svc.cluster.local")

# Redis users: the services that keep state there, each only its own keys (README "RayService
# state in Redis", expectations). `admin` is for tests and operators.
REDIS_KEYS: dict[str, tuple[str, ...]] = {
    Role.CLUSTER_RECONCILER.value: ("raybus:expectations:*",),
    Role.JOB_RECONCILER.value: ("raybus:job:*",),  # connects like every reconciler; keeps nothing yet
    Role.SERVICE_RECONCILER.value: ("raybus:serve-config:*", "raybus:deletion-ts:*"),
}


def _write(path: Path, data: bytes, *, private: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _certs(out: Path, hosts: Iterable[str]) -> None:
    now = dt.datetime.now(dt.UTC)
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "raybus bus CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = _key()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "raybus-nats")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=825))
            .add_extension(_san(hosts), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                                                  x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write(out / "ca.pem", ca.public_bytes(serialization.Encoding.PEM), private=False)
    _write(out / "ca-key.pem", _pem_key(ca_key), private=True)
    _write(out / "server.pem", cert.public_bytes(serialization.Encoding.PEM), private=False)
    _write(out / "server-key.pem", _pem_key(key), private=True)


def password(out: Path, role: str) -> str:
    return (out / "users" / role).read_text().strip()


def nats_auth_config(out: Path, *, cert_dir: str | None = None) -> str:
    """The server config's `tls` and `authorization` blocks. `cert_dir`: where the server finds the
    certificates (the secrets dir itself, or a container's mount path)."""
    where = cert_dir or str(out.resolve())
    users = []
    for role in Role:
        perms = permissions(role)
        pub: dict[str, list[str]] = {"allow": list(perms.publish)}
        if perms.deny_publish:
            pub["deny"] = list(perms.deny_publish)
        users.append({"user": role.value, "password": password(out, role.value),
                      "permissions": {"publish": pub, "subscribe": {"allow": list(perms.subscribe)}}})
    # JSON is valid NATS config syntax, and quotes every password and subject safely.
    tls = {"cert_file": f"{where}/server.pem", "key_file": f"{where}/server-key.pem",
           "ca_file": f"{where}/ca.pem", "timeout": 5}
    return ("tls: " + json.dumps(tls, indent=2) + "\nauthorization: "
            + json.dumps({"users": users}, indent=2) + "\n")


def redis_acl(out: Path) -> str:
    lines = ["user default off",
             f"user admin on >{password(out, 'redis-admin')} ~* &* +@all"]
    for role, patterns in REDIS_KEYS.items():
        keys = " ".join(f"~{p}" for p in patterns)
        # Data commands on its own keys; nothing that reconfigures or flushes the server.
        lines.append(f"user {role} on >{password(out, 'redis-' + role)} {keys} resetchannels "
                     "+@read +@write +@keyspace +@transaction +@connection -@dangerous")
    return "\n".join(lines) + "\n"


def generate(out: Path, *, hosts: Iterable[str] = DEFAULT_HOSTS, shared_read: bool = False) -> Path:
    """Create what is missing in `out` (existing files are kept) and (re)write the configs.

    `shared_read`: make the files readable by other users (compose only: one volume shared by
    containers running as different users; the Kubernetes install mounts per-Pod items instead)."""
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    if not (out / "ca.pem").exists() or not (out / "server.pem").exists():
        _certs(out, hosts)
    names = [r.value for r in Role] + ["redis-admin"] + [f"redis-{r}" for r in REDIS_KEYS]
    for name in names:
        path = out / "users" / name
        if not path.exists():
            _write(path, secrets.token_urlsafe(24).encode(), private=True)
    _write(out / "nats-auth.conf", nats_auth_config(out).encode(), private=True)
    _write(out / "redis-users.acl", redis_acl(out).encode(), private=True)
    if shared_read:
        for path in [out, out / "users", *out.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    return out


def service_env(out: Path, role: Role, *, redis: bool = True) -> dict[str, str]:
    """The RAYBUS_* settings that make one service use its own credentials (paths, not values)."""
    env = {"RAYBUS_NATS_USER": role.value,
           "RAYBUS_NATS_PASSWORD_FILE": str((out / "users" / role.value).resolve()),
           "RAYBUS_NATS_CA_FILE": str((out / "ca.pem").resolve())}
    if redis and role.value in REDIS_KEYS:
        env["RAYBUS_REDIS_USER"] = role.value
        env["RAYBUS_REDIS_PASSWORD_FILE"] = str((out / "users" / f"redis-{role.value}").resolve())
    return env
