"""`python -m raybus_sim`: the local Kubernetes API server (with simulated kubelet) and the
simulated Ray dashboards in one process, dashboards following head pod readiness.

With `--apiserver-kubeconfig` there is no local API server: the simulated node (kubelet) and the
dashboards are API clients of the cluster that kubeconfig names (a real kube-apiserver, whose
kube-controller-manager runs the Job/EndpointSlice controllers), and the RBAC objects, CRDs and
ServiceAccount kubeconfigs asked for are made through that API (realapi.py)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from pathlib import Path

import aiohttp
import uvloop
import yaml
from aiohttp import web

from raybus.runtime.process import GC_GEN0, tune_gc
from raybus_sim.apiserver import DEFAULT_CRD_DIR, start_apiserver, write_kubeconfig
from raybus_sim.dashboard import DashboardRegistry, create_dashboard_app
from raybus_sim.kubelet.client import ClusterView
from raybus_sim.kubelet.node import SimNode

RBAC_KINDS = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts",
              "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
              "Role": "roles", "RoleBinding": "rolebindings"}


def _token_key(path: Path | None) -> bytes | None:
    """The token signing key, kept in a file so a restarted API server accepts earlier tokens."""
    if path is None:
        return None
    if not path.exists():
        path.write_bytes(os.urandom(32))
    return path.read_bytes()


async def _apply_rbac(api_url: str, manifest: Path) -> None:
    """Create the manifest's Namespaces, ServiceAccounts and RBAC objects (as an admin applying
    deploy/kustomize/base/rbac.yaml would); anything else in it is not needed here."""
    async with aiohttp.ClientSession() as http:
        for doc in yaml.safe_load_all(manifest.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") not in RBAC_KINDS:
                continue
            group_version = str(doc["apiVersion"])
            plural = RBAC_KINDS[doc["kind"]]
            ns = (doc.get("metadata") or {}).get("namespace")
            base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
            path = f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"
            async with http.post(api_url + path, json=doc) as resp:
                if resp.status not in (200, 201, 409):
                    raise RuntimeError(f"applying {doc['kind']} from {manifest}: {resp.status} "
                                       f"{await resp.text()}")


async def _serve(args: argparse.Namespace, node: SimNode) -> web.AppRunner:
    registry = DashboardRegistry()
    node.attach_dashboards(registry)
    app = create_dashboard_app(registry)
    node.add_fault_routes(app)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.dashboard_port).start()
    return runner


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def _main_real(args: argparse.Namespace) -> None:
    from raybus_sim import realapi

    admin = str(args.apiserver_kubeconfig)
    await realapi.prepare(admin, crd_dir=Path(args.crd_dir), rbac_manifest=args.rbac_manifest,
                          sa_kubeconfigs=args.sa_kubeconfig)
    node = await SimNode.start(await ClusterView.from_kubeconfig(admin))
    runner = await _serve(args, node)
    print(f"kube-sim ready: node on {admin} dashboards http://{args.host}:{args.dashboard_port}", flush=True)
    await _until_signalled()
    await runner.cleanup()
    await node.stop()


async def _main(args: argparse.Namespace) -> None:
    if args.apiserver_kubeconfig:
        await _main_real(args)
        return
    api = await start_apiserver(args.host, args.port, crd_dir=Path(args.crd_dir),
                                state_file=args.state_file, token_key=_token_key(args.token_key_file))
    if args.rbac_manifest:
        await _apply_rbac(api.url, Path(args.rbac_manifest))
    for spec in args.sa_kubeconfig:  # ns/serviceaccount=path: an RBAC-checked client
        who, _, path = spec.partition("=")
        namespace, _, name = who.partition("/")
        token = api.service_account_token(namespace, name, expiration_s=365 * 24 * 3600)
        write_kubeconfig(path, api.url, token=token)
    runner = await _serve(args, api.node)
    if args.kubeconfig:  # in a container, other containers reach it by name (--kubeconfig-server)
        write_kubeconfig(args.kubeconfig, args.kubeconfig_server or api.url)
    print(f"kube-sim ready: api {api.url} dashboards http://{args.host}:{args.dashboard_port}",
          flush=True)
    await _until_signalled()
    await runner.cleanup()
    await api.stop()  # writes the state file


def main() -> None:
    p = argparse.ArgumentParser(prog="raybus_sim")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6443)
    p.add_argument("--dashboard-port", type=int, default=8265)
    p.add_argument("--kubeconfig", type=Path)
    p.add_argument("--kubeconfig-server", metavar="URL",
                   help="API server address written into --kubeconfig (default: where it listens)")
    p.add_argument("--crd-dir", default=str(DEFAULT_CRD_DIR))
    p.add_argument("--state-file", type=Path)
    p.add_argument("--log-level", default="WARNING")
    p.add_argument("--rbac-manifest", type=Path,
                   help="create the Namespaces/ServiceAccounts/RBAC objects of this manifest at start")
    p.add_argument("--sa-kubeconfig", action="append", default=[], metavar="NS/SA=PATH",
                   help="write a kubeconfig with a ServiceAccount token (RBAC-checked), repeatable")
    p.add_argument("--token-key-file", type=Path, help="ServiceAccount token signing key (kept)")
    p.add_argument("--apiserver-kubeconfig", type=Path,
                   help="no local API server: run the simulated node and dashboards against this "
                        "cluster (admin credentials); its control plane runs the Job/EndpointSlice "
                        "controllers")
    args = p.parse_args()
    logging.basicConfig(level=args.log_level)
    # The simulator shares the bench's two cores with raybus and was its pacing element (one core
    # at 80-100% from apply to all-ready, issue 20): the services' GC settings and event loop.
    tune_gc(GC_GEN0)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_main(args))


if __name__ == "__main__":
    main()
