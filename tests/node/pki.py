"""Certificates and tokens of the one-node cluster (openssl, EC P-256: milliseconds).

The API server serves on the node's bridge address, so Pods reach it through the `kubernetes`
Service; its certificate names that address, the Service's ClusterIP and the in-cluster DNS names.
The API server dials the kubelet with a client certificate of this CA (`kubectl logs/exec`)."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    folder: Path
    tokens: dict[str, str]  # identity -> static bearer token (--token-auth-file)

    def path(self, name: str) -> Path:
        return self.folder / name


# identity -> (user, groups): the users Kubernetes' bootstrap RBAC (and the Node authorizer) knows.
IDENTITIES = {
    "admin": ("admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", ""),
    "scheduler": ("system:kube-scheduler", ""),
    "proxy": ("system:kube-proxy", ""),
}


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)


def _signed(folder: Path, name: str, subject: str, ext: str) -> None:
    _openssl(folder, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key")
    _openssl(folder, "req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr")
    (folder / f"{name}.ext").write_text(ext)
    _openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "30", "-extfile", f"{name}.ext", "-out", f"{name}.crt")


def make_pki(folder: Path, *, node_name: str, node_ip: str, service_ip: str) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    for key in ("ca.key", "sa.key"):
        _openssl(folder, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
    _openssl(folder, "pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub")
    _openssl(folder, "req", "-x509", "-new", "-key", "ca.key", "-days", "30", "-subj", "/CN=raybus-node-ca",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", "-out", "ca.crt")
    sans = (f"IP:127.0.0.1,IP:{node_ip},IP:{service_ip},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
            "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")
    _signed(folder, "apiserver", "/CN=kube-apiserver",
            f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n")
    _signed(folder, "kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client",
            "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n")
    _signed(folder, "kubelet", f"/CN={node_name}",
            f"subjectAltName=IP:{node_ip},DNS:{node_name}\nextendedKeyUsage=serverAuth\n"
            "keyUsage=critical,digitalSignature\n")
    tokens = {identity: secrets.token_hex(24) for identity in (*IDENTITIES, "kubelet")}
    lines = [f'{tokens[i]},{user},{user},"{groups}"' for i, (user, groups) in IDENTITIES.items()]
    # The kubelet as the Node authorizer expects it: system:node:<name> in system:nodes.
    lines.append(f'{tokens["kubelet"]},system:node:{node_name},{node_name},"system:nodes"')
    (folder / "tokens.csv").write_text("\n".join(lines) + "\n")
    (folder / "tokens.csv").chmod(0o600)
    return Pki(folder=folder, tokens=tokens)


def kubeconfig(path: Path, *, server: str, ca: Path, token: str, namespace: str = "default") -> Path:
    import yaml

    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "node",
        "clusters": [{"name": "node", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "node-user", "user": {"token": token}}],
        "contexts": [{"name": "node", "context": {"cluster": "node", "user": "node-user", "namespace": namespace}}],
    }))
    path.chmod(0o600)
    return path
