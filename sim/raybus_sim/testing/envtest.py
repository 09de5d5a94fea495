"""A real Kubernetes control plane for tests: etcd + kube-apiserver + kube-controller-manager.

controller-runtime's envtest, done the way `servers.py` runs nats/redis: real binaries (see
envtest_assets), free loopback ports, children that die with their parent, stopped by PID. Unlike
plain envtest it also runs kube-controller-manager, so the garbage collector, the Job controller,
the ServiceAccount and namespace controllers of the real server act as in a cluster; and it serves
TLS with token authentication and RBAC on, so a component can run with its own least-privilege
ServiceAccount token (TokenRequest API) exactly as it would in a cluster. Flags: see
../shared/envtest/README.md. There is no kubelet: Pods stay Pending unless something writes their
status.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from raybus_sim.testing.envtest_assets import AssetsUnavailable, ensure_assets
from raybus_sim.testing.servers import ServerExitedEarly, die_with_parent, free_port, stop_process

__all__ = ["ApiError", "AssetsUnavailable", "ControlPlane", "ensure_assets", "install_crds", "start_control_plane"]

Json = dict[str, Any]
SERVICE_CIDR = "10.0.0.0/24"
ISSUER = "https://kubernetes.default.svc.cluster.local"


class ApiError(RuntimeError):
    def __init__(self, code: int, body: Json | str) -> None:
        super().__init__(f"{code}: {body}")
        self.code = code
        self.body = body


@dataclass
class ControlPlane:
    workdir: Path
    port: int
    ca_file: Path
    admin_token: str
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items()}

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def request(self, method: str, path: str, body: Json | None = None, *, token: str | None = None,
                content_type: str = "application/json", timeout: float = 30.0) -> Json:
        """One API call as the admin (or `token`); raises ApiError on a non-2xx answer."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self.admin_token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._ssl(), timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
            try:
                raise ApiError(exc.code, json.loads(text)) from None
            except ValueError:
                raise ApiError(exc.code, text) from None
        return json.loads(raw) if raw.strip().startswith(b"{") else {"raw": raw.decode(errors="replace")}

    def token_for(self, namespace: str, service_account: str, expiration_s: int = 3600) -> str:
        """A real ServiceAccount token from the TokenRequest API (`kubectl create token`)."""
        answer = self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": expiration_s}})
        return str(answer["status"]["token"])

    def write_kubeconfig(self, path: Path, token: str, *, namespace: str = "default") -> Path:
        """A kubeconfig (TLS with this CA, bearer token) for kubectl and kubernetes-asyncio."""
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "envtest",
            "clusters": [{"name": "envtest", "cluster": {
                "server": self.url, "certificate-authority": str(self.ca_file.resolve())}}],
            "users": [{"name": "envtest-user", "user": {"token": token}}],
            "contexts": [{"name": "envtest", "context": {
                "cluster": "envtest", "user": "envtest-user", "namespace": namespace}}],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def wait_for(self, cond: Any, what: str, timeout: float = 30.0) -> Any:
        """Poll `cond()` until it returns a truthy value (API errors count as not yet)."""
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(ApiError):
                result = cond()
                if result:
                    return result
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout}s")
            time.sleep(0.05)

    def stop(self) -> None:
        # Reverse start order: the controller-manager and API server before etcd.
        for name in reversed(list(self.procs)):
            stop_process(self.procs[name])
        self.procs.clear()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _pki(d: Path) -> None:
    """CA, a serving cert for 127.0.0.1 and kubernetes.default.svc (what in-cluster clients dial),
    and the ServiceAccount signing key. EC P-256: generated in milliseconds."""
    d.mkdir(parents=True, exist_ok=True)
    for key in ("ca.key", "server.key", "sa.key"):
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key, cwd=d)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-days", "3650", "-subj", "/CN=envtest-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", "-out", "ca.crt", cwd=d)
    _openssl("req", "-new", "-key", "server.key", "-subj", "/CN=kube-apiserver", "-out", "server.csr", cwd=d)
    sans = ("subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
            "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
            "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
    (d / "server.ext").write_text(sans)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "3650", "-extfile", "server.ext", "-out", "server.crt", cwd=d)


def _spawn(name: str, argv: list[str], workdir: Path) -> subprocess.Popen[bytes]:
    with (workdir / f"{name}.log").open("ab") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
                                preexec_fn=die_with_parent())  # noqa: PLW1509 - as servers.py


def _tail(workdir: Path, name: str) -> str:
    log = workdir / f"{name}.log"
    return log.read_text(errors="replace")[-1500:] if log.exists() else ""


def _wait(cond: Any, what: str, procs: dict[str, subprocess.Popen[bytes]], workdir: Path,
          timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise ServerExitedEarly(f"{name} exited with code {proc.returncode} while waiting for "
                                        f"{what}: {_tail(workdir, name)}")
        with contextlib.suppress(OSError, ApiError, ValueError):
            if cond():
                return
        time.sleep(0.1)
    raise TimeoutError(f"{what} not within {timeout}s; logs: "
                       + " | ".join(f"{n}: {_tail(workdir, n)[-500:]}" for n in procs))


def start_control_plane(workdir: Path, *, timeout: float = 90.0, attempts: int = 3) -> ControlPlane:
    """Start etcd, kube-apiserver, kube-controller-manager; return once /readyz is ok and the
    `default` ServiceAccount exists (Pods can be created). A port taken between our probe and the
    server's bind (ServerExitedEarly) is retried on new ports."""
    for attempt in range(attempts):
        try:
            return _start(workdir.resolve() / f"run{attempt}", timeout)
        except ServerExitedEarly:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _start(workdir: Path, timeout: float) -> ControlPlane:
    assets = ensure_assets()
    pki = workdir / "pki"
    _pki(pki)
    admin_token, kcm_token = secrets.token_hex(24), secrets.token_hex(24)
    # Static tokens (--token-auth-file): token,user,uid,"groups". The controller-manager runs as
    # the user its bootstrap RBAC role is bound to, as kubeadm sets it up.
    tokens = workdir / "tokens.csv"
    tokens.write_text(f'{admin_token},admin,admin,"system:masters"\n'
                      f"{kcm_token},system:kube-controller-manager,kcm\n")
    tokens.chmod(0o600)
    etcd_port, peer_port, api_port, kcm_port = free_port(), free_port(), free_port(), free_port()
    cp = ControlPlane(workdir=workdir, port=api_port, ca_file=pki / "ca.crt", admin_token=admin_token)
    try:
        cp.procs["etcd"] = _spawn("etcd", [
            str(assets / "etcd"), "--data-dir", str(workdir / "etcd"), "--name", "default",
            "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
            "--listen-metrics-urls", "", "--log-level", "warn",
            # Test data: no fsync (each write otherwise waits for the disk; 2-core CI machine).
            "--unsafe-no-fsync"], workdir)
        cp.procs["kube-apiserver"] = _spawn("kube-apiserver", [
            str(assets / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={api_port}",
            f"--cert-dir={workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki / 'server.crt'}", f"--tls-private-key-file={pki / 'server.key'}",
            f"--client-ca-file={pki / 'ca.crt'}", f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC", "--anonymous-auth=false",
            f"--service-account-issuer={ISSUER}", f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--endpoint-reconciler-type=none",
            "--allow-privileged=true", "--profiling=false", "--v=0"], workdir)
        _wait(lambda: cp.request("GET", "/readyz", timeout=2)["raw"] == "ok",
              "kube-apiserver /readyz", cp.procs, workdir, timeout)
        kcm_kubeconfig = cp.write_kubeconfig(workdir / "kcm.kubeconfig", kcm_token, namespace="kube-system")
        cp.write_kubeconfig(cp.admin_kubeconfig, admin_token)
        cp.procs["kube-controller-manager"] = _spawn("kube-controller-manager", [
            str(assets / "kube-controller-manager"), f"--kubeconfig={kcm_kubeconfig}",
            f"--authentication-kubeconfig={kcm_kubeconfig}", f"--authorization-kubeconfig={kcm_kubeconfig}",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=true",
            f"--cluster-signing-cert-file={pki / 'ca.crt'}", f"--cluster-signing-key-file={pki / 'ca.key'}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={kcm_port}",
            f"--cert-dir={workdir / 'kcm-certs'}", f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--profiling=false", "--v=0"], workdir)
        _wait(lambda: cp.request("GET", "/api/v1/namespaces/default/serviceaccounts/default", timeout=2),
              "the default ServiceAccount (kube-controller-manager)", cp.procs, workdir, timeout)
    except BaseException:
        cp.stop()
        raise
    return cp


def install_crds(cp: ControlPlane, paths: list[Path] | tuple[Path, ...], *, timeout: float = 60.0,
                 field_manager: str = "raybus-install") -> list[str]:
    """Server-side apply the CustomResourceDefinitions in `paths` (files or folders of YAML) and
    wait until each is Established and served by discovery. Returns their names. Server-side, as
    every install path: full structural schemas (about 1 MB a CRD) are far over the 256 KiB
    last-applied annotation that client-side apply would write."""
    names: list[str] = []
    for path in paths:
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            for doc in yaml.load_all(file.read_text(), Loader=_LOADER):
                if doc and doc.get("kind") == "CustomResourceDefinition":
                    names.append(apply_crd(cp, doc, field_manager=field_manager))
    deadline = time.monotonic() + timeout
    for name in names:
        while not _established(cp, name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established within {timeout}s")
            time.sleep(0.1)
    return names


_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: a full-schema CRD is 0.5-0.8 MB of YAML


def apply_crd(cp: ControlPlane, doc: Json, *, field_manager: str = "raybus-install") -> str:
    """`kubectl apply --server-side --force-conflicts` of one CRD."""
    name = str(doc["metadata"]["name"])
    cp.request("PATCH", f"{_CRDS}/{name}?fieldManager={field_manager}&force=true", doc,
               content_type="application/apply-patch+yaml", timeout=120.0)
    return name


def _established(cp: ControlPlane, name: str) -> bool:
    crd = cp.request("GET", f"{_CRDS}/{name}")
    conditions = {c.get("type"): c.get("status") for c in crd.get("status", {}).get("conditions") or []}
    if conditions.get("Established") != "True":
        return False
    group = crd["spec"]["group"]
    served = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
    plural = crd["spec"]["names"]["plural"]
    # Established can precede the discovery document by a moment; clients resolve through it.
    for version in served:
        try:
            doc = cp.request("GET", f"/apis/{group}/{version}")
        except ApiError:
            return False
        if plural not in {r.get("name") for r in doc.get("resources") or []}:
            return False
    return True
