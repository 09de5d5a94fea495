"""raybus services as processes against the real control plane, each with its deploy RBAC.

Like `raybus up` (sim/raybus_sim/devstack/stack.py) but the API server is the envtest kube-apiserver: the
watcher, the command-executor and the dashboard-poller run with ServiceAccount tokens (TokenRequest
API) bound to their ClusterRoles from the deploy manifest, through a RoleBinding in the test's
namespace only (their informers are scoped to that namespace with RAYBUS_WATCH_NAMESPACE), so the
real server's RBAC checks every call they make, and tests sharing the control plane do not see each
other's objects.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from raybus_sim.devstack.stack import RBAC_MANIFEST, SERVICE_ACCOUNTS
from raybus_sim.testing.envtest import ApiError, ControlPlane
from raybus_sim.testing.servers import die_with_parent, stop_process

REPO = Path(__file__).resolve().parents[3]
RBAC = "/apis/rbac.authorization.k8s.io/v1"
COMPLAINTS = ("WARNING", "ERROR", "CRITICAL", "RAW")


def cluster_role(name: str) -> dict[str, Any]:
    return dict(next(d for d in yaml.safe_load_all(RBAC_MANIFEST.read_text())
                     if d and d.get("kind") == "ClusterRole" and d["metadata"]["name"] == name))


def service_token(cp: ControlPlane, namespace: str, account: str) -> str:
    """A token of ServiceAccount `account` in `namespace`, bound there to the deploy manifest's
    ClusterRole of the same name (copied as `<account>-<namespace>`; `cleanup` deletes it)."""
    role_name = f"{account}-{namespace}"
    cp.request("POST", f"{RBAC}/clusterroles",
               {"metadata": {"name": role_name}, "rules": cluster_role(account)["rules"]})
    cp.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": account}})
    cp.request("POST", f"{RBAC}/namespaces/{namespace}/rolebindings", {
        "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})
    return cp.token_for(namespace, account)


def log_lines(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        out.append(entry if isinstance(entry, dict) else {"level": "RAW", "message": line})
    return out


def complaints(log: Path) -> list[dict[str, Any]]:
    return [e for e in log_lines(log) if e.get("level") in COMPLAINTS]


def logged(log: Path, message: str, **fields: str) -> bool:
    return any(e.get("message") == message and all(e.get(k) == v for k, v in fields.items())
               for e in log_lines(log))


@dataclass
class RealApiServices:
    cp: ControlPlane
    namespace: str
    home: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    cluster_roles: list[str] = field(default_factory=list)

    def log(self, name: str) -> Path:
        return self.home / f"{name}.log"

    def start(self, service: str, *, kubeconfig: Path | None = None, **env: str) -> subprocess.Popen[bytes]:
        """Spawn `python -m <service>`; the watcher/executor get their own ServiceAccount (or the
        credentials of `kubeconfig`, as the caller bound them)."""
        name = service.replace("_", "-")
        extra = dict(env)
        account = SERVICE_ACCOUNTS.get(service)
        if kubeconfig is not None:
            extra["RAYBUS_KUBECONFIG"] = str(kubeconfig)
        elif account is not None:
            token = service_token(self.cp, self.namespace, account)
            self.cluster_roles.append(f"{account}-{self.namespace}")
            extra["RAYBUS_KUBECONFIG"] = str(self.cp.write_kubeconfig(self.home / f"{name}.kubeconfig", token))
        if service in SERVICE_ACCOUNTS:  # their informers list and watch this namespace only
            extra.setdefault("RAYBUS_WATCH_NAMESPACE", self.namespace)
        with self.log(name).open("ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", service, "--replica-id", name],
                                    stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                    env={**self.env, **extra}, preexec_fn=die_with_parent())  # noqa: PLW1509
        self.procs[name] = proc
        return proc

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            assert proc.poll() is None, f"{name} exited: {self.log(name).read_text()[-2000:]}"

    def complaints(self) -> dict[str, list[dict[str, Any]]]:
        found = {name: complaints(self.log(name)) for name in self.procs}
        return {name: lines for name, lines in found.items() if lines}

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            stop_process(proc)
        for role in self.cluster_roles:
            try:
                self.cp.request("DELETE", f"{RBAC}/clusterroles/{role}")
            except ApiError as exc:
                if exc.code != 404:
                    raise
