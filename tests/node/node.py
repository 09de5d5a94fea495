"""A one-node Kubernetes on this machine, from the project's own files (docs/real-node.md).

etcd + kube-apiserver + kube-controller-manager (the envtest binaries), containerd + runc (Debian),
the CNI bridge plugin on 198.18.0.0/24, and kubelet, kube-proxy, kube-scheduler v1.36.2
(../shared/realnode). Every process is a child of this one (it dies with it) and its PID is kept
in <run>/state.json, so `python -m tests.node down` tears a crashed run down as well.

The API server listens on the bridge's address: the host, the kubelet and the Pods (through the
`kubernetes` Service, whose endpoint the API server's lease reconciler keeps) all reach it there.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import lzma
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from raybus_sim.testing.envtest_assets import ensure_assets
from raybus_sim.testing.servers import die_with_parent, free_port, stop_process
from tests.node import pki as pkimod

NODE_NAME = "raybus-node"
BRIDGE = "raybus0"
NODE_IP = "198.18.0.1"
POD_CIDR = "198.18.0.0/24"
SERVICE_CIDR = "198.19.0.0/16"
KUBERNETES_SERVICE_IP = "198.19.0.1"
DNS_SERVICE_IP = "198.19.0.10"
API_PORT = 6443
CNI_NETWORK = "raybus-node"
REPO = Path(__file__).resolve().parents[2]
REALNODE = REPO.parent / "shared" / "realnode"
CACHE = Path(os.environ.get("RAYBUS_NODE_CACHE", "/var/cache/raybus-node"))
RUN = Path(os.environ.get("RAYBUS_NODE_DIR", "/var/tmp/raybus-node"))
# Global settings a node needs: Pods route through the host, bridged traffic meets kube-proxy's rules.
SYSCTLS = {"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"}
# sha256 of the unpacked binaries (../shared/realnode/README.md).
REALNODE_SHA256 = {
    "kubelet": "bd1f446d2248da3fb8b7f3e18561416223963ad6e9b2dffe9240e2b5ca704496",
    "kube-proxy": "c8e4d252cd083f5120df3eedf62fed75958ae5cc976c0e450d510b8c80a7cad1",
    "kube-scheduler": "873961af9d5cbf0908cfc0371c2e967442481121fdf77c2e6585830b2441b19e",
}


def log(msg: str) -> None:
    print(f"node: {msg}", flush=True)


def run(*argv: str, check: bool = True, input_: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, check=check, capture_output=True, input=input_)


def realnode_binary(name: str) -> Path:
    out = CACHE / "bin" / name
    if out.exists() and hashlib.sha256(out.read_bytes()).hexdigest() == REALNODE_SHA256[name]:
        return out
    data = lzma.decompress((REALNODE / f"{name}.xz").read_bytes())
    if hashlib.sha256(data).hexdigest() != REALNODE_SHA256[name]:
        raise RuntimeError(f"{REALNODE / name}.xz: sha256 differs from its README")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    out.chmod(0o755)
    return out


@dataclass
class Node:
    root: Path
    pki: pkimod.Pki
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    sysctl_before: dict[str, str] = field(default_factory=dict)
    lock_fd: int = -1

    @property
    def server(self) -> str:
        return f"https://{NODE_IP}:{API_PORT}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    def kubectl(self, *args: str, check: bool = True, input_: str | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["kubectl", f"--kubeconfig={self.admin_kubeconfig}", *args], check=False,
                              capture_output=True, text=True, input=input_, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        return run("ctr", "--address", str(self.containerd_socket), "-n", "k8s.io", *args, check=check)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        with (self.root / "logs" / f"{name}.log").open("ab") as out:
            self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.root,
                                                env={**os.environ, **(env or {})},
                                                preexec_fn=die_with_parent())  # noqa: PLW1509
        self.save_state()

    def save_state(self) -> None:
        state = {"pids": {n: p.pid for n, p in self.procs.items()}, "sysctl": self.sysctl_before,
                 "containerd_socket": str(self.containerd_socket)}
        (self.root / "state.json").write_text(json.dumps(state, indent=1))

    def wait(self, cond: Any, what: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}) while waiting for {what}: "
                                       f"{self.tail(name)}")
            with contextlib.suppress(Exception):
                result = cond()
                if result:
                    return result
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout:.0f}s")
            time.sleep(0.5)

    def tail(self, name: str, chars: int = 2000) -> str:
        path = self.root / "logs" / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop_proc(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None:
            stop_process(proc)
            self.save_state()


def _lock() -> int:
    fd = os.open("/run/raybus-node.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RuntimeError("another raybus test node runs on this machine (/run/raybus-node.lock)") from None
    return fd


def _set_sysctls(node: Node) -> None:
    for key, value in SYSCTLS.items():
        path = Path("/proc/sys") / key
        node.sysctl_before[key] = path.read_text().strip()
        if node.sysctl_before[key] != value:
            path.write_text(value)
    node.save_state()


def _bridge() -> None:
    if run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "addr", "replace", f"{NODE_IP}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")


def _control_plane(node: Node) -> None:
    assets, p = ensure_assets(), node.pki.path
    etcd_port, peer_port = free_port(), free_port()
    node.spawn("etcd", [
        str(assets / "etcd"), "--data-dir", str(node.root / "etcd"), "--name", "default",
        "--listen-client-urls", f"http://127.0.0.1:{etcd_port}", "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
        "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
        "--initial-cluster", f"default=http://127.0.0.1:{peer_port}", "--listen-metrics-urls", "",
        "--log-level", "warn", "--unsafe-no-fsync"])
    node.spawn("kube-apiserver", [
        str(assets / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        f"--bind-address={NODE_IP}", f"--advertise-address={NODE_IP}", f"--secure-port={API_PORT}",
        f"--cert-dir={node.root / 'apiserver-certs'}",
        f"--tls-cert-file={p('apiserver.crt')}", f"--tls-private-key-file={p('apiserver.key')}",
        f"--client-ca-file={p('ca.crt')}", f"--token-auth-file={p('tokens.csv')}",
        "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction", "--anonymous-auth=false",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={p('sa.pub')}", f"--service-account-signing-key-file={p('sa.key')}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        f"--kubelet-client-certificate={p('kubelet-client.crt')}", f"--kubelet-client-key={p('kubelet-client.key')}",
        "--kubelet-preferred-address-types=InternalIP", "--allow-privileged=true", "--profiling=false", "--v=0"])
    pkimod.kubeconfig(node.admin_kubeconfig, server=node.server, ca=p("ca.crt"), token=node.pki.tokens["admin"])
    node.wait(lambda: node.kubectl("get", "--raw", "/readyz", check=False, timeout=5).stdout.strip() == "ok",
              "kube-apiserver /readyz", 90)
    kcm = pkimod.kubeconfig(node.root / "kcm.kubeconfig", server=node.server, ca=p("ca.crt"),
                            token=node.pki.tokens["controller-manager"])
    node.spawn("kube-controller-manager", [
        str(assets / "kube-controller-manager"), f"--kubeconfig={kcm}", f"--authentication-kubeconfig={kcm}",
        f"--authorization-kubeconfig={kcm}", f"--service-account-private-key-file={p('sa.key')}",
        f"--root-ca-file={p('ca.crt')}", "--use-service-account-credentials=true",
        f"--cluster-signing-cert-file={p('ca.crt')}", f"--cluster-signing-key-file={p('ca.key')}",
        "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
        f"--cert-dir={node.root / 'kcm-certs'}", f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--profiling=false", "--v=0"])
    node.wait(lambda: node.kubectl("get", "sa", "default", "-n", "default", check=False).returncode == 0,
              "the default ServiceAccount", 90)


def _containerd_config(node: Node) -> Path:
    base = run("containerd", "config", "default").stdout.decode()
    d = node.root / "containerd"
    cni_conf = node.root / "cni"
    replacements = {
        # The content store outlives a run (CACHE): images imported once are there the next time.
        'root = "/var/lib/containerd"': f'root = "{CACHE / "containerd-root"}"',
        'state = "/run/containerd"': f'state = "{d / "state"}"',
        'address = "/run/containerd/containerd.sock"': f'address = "{node.containerd_socket}"',
        'path = "/opt/containerd"': f'path = "{d / "opt"}"',
        'bin_dir = "/opt/cni/bin"': 'bin_dir = "/usr/lib/cni"',
        'conf_dir = "/etc/cni/net.d"': f'conf_dir = "{cni_conf}"',
        # root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj (../shared/realnode).
        "restrict_oom_score_adj = false": "restrict_oom_score_adj = true",
        "netns_mounts_under_state_dir = false": "netns_mounts_under_state_dir = true",
        'sandbox_image = "registry.k8s.io/pause:3.6"': 'sandbox_image = "localhost/pause:node"',
    }
    for old, new in replacements.items():
        if old not in base:
            raise RuntimeError(f"containerd's default config lacks {old!r}")
        base = base.replace(old, new)
    (d).mkdir(parents=True, exist_ok=True)
    cni_conf.mkdir(exist_ok=True)
    (cni_conf / "10-raybus-node.conflist").write_text(json.dumps({
        "cniVersion": "0.4.0", "name": CNI_NETWORK,
        "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": True, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP}]],
                      "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(node.root / "cni-ipam")}}
        ]}, indent=1))
    (d / "config.toml").write_text(base)
    return d / "config.toml"


def _containerd(node: Node) -> None:
    config = _containerd_config(node)
    node.spawn("containerd", ["containerd", "--config", str(config)])
    node.wait(lambda: node.ctr("version", check=False).returncode == 0, "containerd", 60)


def _kubelet(node: Node) -> None:
    p = node.pki.path
    kubeconfig = pkimod.kubeconfig(node.root / "kubelet.kubeconfig", server=node.server, ca=p("ca.crt"),
                                   token=node.pki.tokens["kubelet"])
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        # cgroups are v1 here, and the kubelet cannot create QoS hierarchies (../shared/realnode).
        "failCgroupV1": False, "cgroupDriver": "cgroupfs", "cgroupsPerQOS": False, "enforceNodeAllocatable": [],
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}", "failSwapOn": False,
        "address": NODE_IP, "port": 10250, "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
        "readOnlyPort": 0, "clusterDNS": [DNS_SERVICE_IP], "clusterDomain": "cluster.local",
        "tlsCertFile": str(p("kubelet.crt")), "tlsPrivateKeyFile": str(p("kubelet.key")),
        # Only the API server's client certificate (this CA) may call it: kubectl logs/exec.
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(p("ca.crt"))}},
        "authorization": {"mode": "AlwaysAllow"},
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False, "maxPods": 110, "shutdownGracePeriod": "0s",
    }
    (node.root / "kubelet.yaml").write_text(yaml.safe_dump(config))
    node.spawn("kubelet", [
        str(realnode_binary("kubelet")), f"--config={node.root / 'kubelet.yaml'}", f"--kubeconfig={kubeconfig}",
        f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}", f"--root-dir={node.root / 'kubelet'}",
        f"--cert-dir={node.root / 'kubelet-certs'}", "--v=1"])

    def ready() -> bool:
        conds = {c["type"]: c["status"] for c in node.get("node", NODE_NAME)["status"]["conditions"]}
        return conds.get("Ready") == "True"
    node.wait(ready, f"node {NODE_NAME} Ready", 120)


def _proxy_and_scheduler(node: Node) -> None:
    p = node.pki.path
    proxy = pkimod.kubeconfig(node.root / "proxy.kubeconfig", server=node.server, ca=p("ca.crt"),
                              token=node.pki.tokens["proxy"])
    node.spawn("kube-proxy", [
        str(realnode_binary("kube-proxy")), f"--kubeconfig={proxy}", f"--hostname-override={NODE_NAME}",
        "--proxy-mode=iptables", "--cluster-cidr=198.18.0.0/16", "--conntrack-max-per-core=0",
        "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
        # NodePorts on the bridge only: on 127.0.0.1 they would need route_localnet, a global setting.
        f"--nodeport-addresses={NODE_IP}/32", f"--healthz-bind-address=127.0.0.1:{free_port()}",
        f"--metrics-bind-address=127.0.0.1:{free_port()}", "--v=1"])
    sched = pkimod.kubeconfig(node.root / "scheduler.kubeconfig", server=node.server, ca=p("ca.crt"),
                              token=node.pki.tokens["scheduler"])
    node.spawn("kube-scheduler", [
        str(realnode_binary("kube-scheduler")), f"--kubeconfig={sched}", f"--authentication-kubeconfig={sched}",
        f"--authorization-kubeconfig={sched}", "--leader-elect=false", "--bind-address=127.0.0.1",
        f"--secure-port={free_port()}", "--v=1"])


def start(import_images: Any = None) -> Node:
    """Bring the node up; `import_images(node)` runs once containerd answers (before the kubelet:
    the pause image must be there for the first sandbox)."""
    lock_fd = _lock()
    if (RUN / "state.json").exists():
        from tests.node.teardown import teardown_state
        log(f"a previous run left {RUN}/state.json: tearing it down first")
        teardown_state(RUN)
    root = RUN
    for sub in ("logs",):
        (root / sub).mkdir(parents=True, exist_ok=True)
    pki = pkimod.make_pki(root / "pki", node_name=NODE_NAME, node_ip=NODE_IP, service_ip=KUBERNETES_SERVICE_IP)
    node = Node(root=root, pki=pki, lock_fd=lock_fd)
    node.save_state()
    try:
        started = time.monotonic()
        _set_sysctls(node)
        _bridge()
        _control_plane(node)
        log(f"control plane ready ({time.monotonic() - started:.0f} s)")
        _containerd(node)
        if import_images is not None:
            import_images(node)
        _kubelet(node)
        _proxy_and_scheduler(node)
        log(f"node {NODE_NAME} Ready ({time.monotonic() - started:.0f} s)")
    except BaseException:
        from tests.node.teardown import teardown
        teardown(node)
        raise
    return node
