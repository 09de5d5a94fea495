"""The bus's credentials and TLS material, generated in one place (`raybus bus-secrets`) for the
local stack (`.raybus/secrets/`), compose and the Kubernetes install.

Layout of a secrets directory:

    ca.pem, ca-key.pem          a private CA (the install's own; clients trust only it)
    server.pem, server-key.pem  NATS's certificate (SANs: the hosts given), for clients and routes
    redis.pem, redis-key.pem    Redis's serving certificate (the install's Redis serves TLS only)
    users/<role>                one password per bus role (bus/permissions.py), 0600
    nats-auth.conf              NATS `authorization` + `tls` blocks, included by the server config
    nats-routes.conf            the cluster block's `tls` (routes: mutual TLS with this CA)
    redis-users.acl             Redis ACL users (reconcilers that keep state, and an admin)

Passwords are random per install and never derived; nothing here is logged. The server configs
hold only their hashes: bcrypt for NATS (NATS checks a `$2a$` password with bcrypt), SHA-256 for
Redis (its ACL `#<hex>` form). Routes between NATS servers authenticate by certificate: a route
is mutual TLS, and only the NATS servers hold server-key.pem. Re-running keeps an existing
directory's files (a restarted `make run` must keep the credentials its services use).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import json
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from raybus.bus.permissions import Role, permissions

DEFAULT_HOSTS = ("127.0.0.1", "localhost", "nats", "raybus-nats", "*.raybus-nats",
                 "raybus-nats.raybus-system.svc", "*.raybus-nats.raybus-system.svc",
                 "*.raybus-nats.raybus-system.svc.cluster.local",
                 # the install's Services: nats (clients) and nats-headless (routes: nats-<i>.nats-headless)
                 "nats.raybus-system.svc", "*.nats-headless", "*.nats-headless.raybus-system.svc",
                 "*.nats-headless.raybus-system.svc.cluster.local")
REDIS_HOSTS = ("127.0.0.1", "localhost", "redis", "redis.raybus-system.svc",
               "redis.raybus-system.svc.cluster.local")
# bcrypt's work factor slows the guessing of a human password; these are 192 random bits, which no
# guessing reaches at any cost, so the hash only has to keep the password out of the config. A
# low factor keeps each connect (the server checks the hash) and each `generate` cheap: NATS's
# default, 11, cost a connect ~0.2 s and `generate` ~8 s on a 2-core machine.
BCRYPT_COST = 6

# Redis users: the services that keep state there, each only its own keys (docs/architecture.md "State
# in Redis", expectations). `admin` is for tests and operators.
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


def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def subject_alt_names(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _ca(out: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "raybus bus CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    _write(out / "ca.pem", ca.public_bytes(serialization.Encoding.PEM), private=False)
    _write(out / "ca-key.pem", pem_key(ca_key), private=True)


def _leaf(out: Path, name: str, common_name: str, hosts: Iterable[str]) -> None:
    """<name>.pem / <name>-key.pem signed by the CA; server and client use (NATS routes are both)."""
    now = dt.datetime.now(dt.UTC)
    ca = x509.load_pem_x509_certificate((out / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((out / "ca-key.pem").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = _key()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=825))
            .add_extension(subject_alt_names(hosts), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                                                  x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write(out / f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM), private=False)
    _write(out / f"{name}-key.pem", pem_key(key), private=True)


def password(out: Path, role: str) -> str:
    return (out / "users" / role).read_text().strip()


def bcrypt_hash(secret: str) -> str:
    return bcrypt.hashpw(secret.encode(), bcrypt.gensalt(rounds=BCRYPT_COST, prefix=b"2a")).decode()


def _tls(where: str, **extra: object) -> str:
    # JSON is valid NATS config syntax, and quotes every path, password and subject safely.
    return json.dumps({"cert_file": f"{where}/server.pem", "key_file": f"{where}/server-key.pem",
                       "ca_file": f"{where}/ca.pem", "timeout": 5, **extra}, indent=2)


def nats_auth_config(out: Path, *, cert_dir: str | None = None) -> str:
    """The server config's `tls` and `authorization` blocks, passwords bcrypt-hashed. `cert_dir`:
    where the server finds the certificates (the secrets dir itself, or a container's mount path)."""
    where = cert_dir or str(out.resolve())
    users = []
    for role in Role:
        perms = permissions(role)
        pub: dict[str, list[str]] = {"allow": list(perms.publish)}
        if perms.deny_publish:
            pub["deny"] = list(perms.deny_publish)
        users.append({"user": role.value, "password": bcrypt_hash(password(out, role.value)),
                      "permissions": {"publish": pub, "subscribe": {"allow": list(perms.subscribe)}}})
    return "tls: " + _tls(where) + "\nauthorization: " + json.dumps({"users": users}, indent=2) + "\n"


def nats_routes_config(out: Path, *, cert_dir: str | None = None) -> str:
    """The `tls` block of NATS's `cluster` block (include it there): every route is mutual TLS with
    the install's CA, so a peer without the NATS servers' key can neither join nor listen in."""
    return "tls: " + _tls(cert_dir or str(out.resolve()), verify=True) + "\n"


def redis_acl(out: Path) -> str:
    """Users with the SHA-256 of their password (`#<hex>`): the file holds no password."""
    def sha(name: str) -> str:
        return hashlib.sha256(password(out, name).encode()).hexdigest()

    lines = ["user default off", f"user admin on #{sha('redis-admin')} ~* &* +@all"]
    for role, patterns in REDIS_KEYS.items():
        keys = " ".join(f"~{p}" for p in patterns)
        # Data commands on its own keys; nothing that reconfigures or flushes the server.
        lines.append(f"user {role} on #{sha('redis-' + role)} {keys} resetchannels "
                     "+@read +@write +@keyspace +@transaction +@connection -@dangerous")
    return "\n".join(lines) + "\n"


def generate(out: Path, *, hosts: Iterable[str] = DEFAULT_HOSTS, redis_hosts: Iterable[str] = REDIS_HOSTS,
             shared_read: bool = False) -> Path:
    """Create what is missing in `out` (existing files are kept) and (re)write the configs.

    `shared_read`: make the files readable by other users (compose only: one volume shared by
    containers running as different users; the Kubernetes install mounts per-Pod items instead)."""
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    if not (out / "ca.pem").exists() or not (out / "ca-key.pem").exists():
        _ca(out)
        for stale in ("server.pem", "redis.pem"):  # signed by a CA that is gone
            (out / stale).unlink(missing_ok=True)
    if not (out / "server.pem").exists():
        _leaf(out, "server", "raybus-nats", hosts)
    if not (out / "redis.pem").exists():
        _leaf(out, "redis", "raybus-redis", redis_hosts)
    names = [r.value for r in Role] + ["redis-admin"] + [f"redis-{r}" for r in REDIS_KEYS]
    for name in names:
        path = out / "users" / name
        if not path.exists():
            _write(path, secrets.token_urlsafe(24).encode(), private=True)
    _write(out / "nats-auth.conf", nats_auth_config(out).encode(), private=True)
    _write(out / "nats-routes.conf", nats_routes_config(out).encode(), private=True)
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
