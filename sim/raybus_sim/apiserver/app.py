"""Application assembly: create_app / start_apiserver / write_kubeconfig."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from .auth import ADMIN_TOKEN, Authenticator, Authorizer
from .errors import ApiError
from .faults import ApiFaults
from .gc import GarbageCollector
from .handlers import dispatch
from .jsontree import json_copy
from .keys import STATE, ServerState
from .persistence import dump_state, load_state
from .resources import new_registry
from .store import Event, Obj, Store

log = logging.getLogger(__name__)
NODE_CONFIG: web.AppKey[Any] = web.AppKey("raybus_sim_node_config", object)
DEFAULT_CRD_DIR = Path(__file__).resolve().parents[3] / "deploy" / "crds"
CRD_GR = "customresourcedefinitions.apiextensions.k8s.io"
BOOT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _crd_listener(store: Store) -> Any:
    def on_event(ev: Event) -> None:
        if ev.rt.gr == "namespaces" and ev.type == "ADDED":
            # Stand-in for the serviceaccount controller: every namespace gets a "default" SA.
            sa_rt = store.registry.get("", "v1", "serviceaccounts")
            name = ev.obj["metadata"]["name"]
            if sa_rt and store.find(sa_rt, name, "default") is None:
                _safe_create(store, sa_rt, name, {"metadata": {"name": "default"}})
            # Stand-in for the root-CA publisher: every namespace gets kube-root-ca.crt.
            cm_rt = store.registry.get("", "v1", "configmaps")
            if cm_rt and store.find(cm_rt, name, "kube-root-ca.crt") is None:
                _safe_create(store, cm_rt, name, {"metadata": {"name": "kube-root-ca.crt", "annotations": {
                    "kubernetes.io/description": "Contains a CA bundle that can be used to verify the "
                    "kube-apiserver when using internal endpoints such as the internal service IP or "
                    "kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes "
                    "clusters."}}, "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nraybus-sim\n"
                                                      "-----END CERTIFICATE-----\n"}})
        if ev.rt.gr != CRD_GR:
            return
        if ev.type == "DELETED":
            rts = [rt for rt in store.registry.by_path.values()
                   if store.registry.crd_owned.get(rt.gr) == ev.obj["metadata"]["name"]]
            if rts:  # upstream's customresourcecleanup finalizer: instances go with their CRD
                for obj in list(store.state(rts[0].gr).objects.values()):
                    store._remove(rts[0], obj)
            store.registry.remove_crd(ev.obj["metadata"]["name"])
        else:
            store.registry.add_crd(ev.obj)
    return on_event


def _safe_create(store: Store, rt: Any, ns: str, obj: Obj) -> None:
    try:
        store.create(rt, ns, obj)
    except ApiError:
        pass


@lru_cache(maxsize=64)
def _crd_docs(path: Path, mtime_ns: int, size: int) -> tuple[dict[str, Any], ...]:
    # Parsing the CRD YAML dominates server start; every test starts servers, so parse each file once.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(d for d in yaml.load_all(path.read_text(), Loader=loader)
                 if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition")


def load_crd_dir(store: Store, crd_dir: Path) -> int:
    rt = store.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    assert rt is not None
    count = 0
    for path in sorted(crd_dir.glob("*.y*ml")) if crd_dir.is_dir() else []:
        st = path.stat()
        for cached in _crd_docs(path, st.st_mtime_ns, st.st_size):
            # The parsed spec is shared by every server of this process: stored objects are never
            # changed in place (writes replace them, patches apply to a copy), and a deep copy of
            # the full CRDs (2.5 MB of YAML) was most of a start's time.
            doc = {**cached, "metadata": json_copy(cached["metadata"])}
            name = doc["metadata"]["name"]
            cur = store.find(rt, "", name)
            if cur is None:
                store.create(rt, "", doc)
            else:  # restart with a state file: the directory wins for the spec
                store.update(rt, "", name, dict(doc, metadata=dict(cur["metadata"])))
            count += 1
    return count


def _bootstrap(store: Store) -> None:
    ns_rt = store.registry.get("", "v1", "namespaces")
    svc_rt = store.registry.get("", "v1", "services")
    assert ns_rt and svc_rt
    for ns in BOOT_NAMESPACES:
        if store.find(ns_rt, "", ns) is None:
            store.create(ns_rt, "", {"metadata": {"name": ns}})
    # Bootstrap RBAC policy: cluster-admin, held by system:masters (the admin token's group).
    cr_rt = store.registry.get("rbac.authorization.k8s.io", "v1", "clusterroles")
    crb_rt = store.registry.get("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
    assert cr_rt and crb_rt
    labels = {"kubernetes.io/bootstrapping": "rbac-defaults"}
    if store.find(cr_rt, "", "cluster-admin") is None:
        store.create(cr_rt, "", {"metadata": {"name": "cluster-admin", "labels": labels}, "rules": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]})
    if store.find(crb_rt, "", "cluster-admin") is None:
        store.create(crb_rt, "", {"metadata": {"name": "cluster-admin", "labels": labels}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}, "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]})
    if store.find(svc_rt, "default", "kubernetes") is None:
        store.create(svc_rt, "default", {"metadata": {"name": "kubernetes", "labels": {
            "component": "apiserver", "provider": "kubernetes"}}, "spec": {
            "clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443}]}})


def create_app(*, crd_dir: Path | str | None = DEFAULT_CRD_DIR, state_file: Path | str | None = None,
               history_size: int = 10000, kubelet: bool | Any = True, watch_timeout: float = 1800.0,
               bookmark_interval: float = 60.0, orphan_check_delay: float = 0.5,
               watch_list: bool = False, token_key: bytes | None = None) -> web.Application:
    """kubelet: True for defaults, False to disable, or a raybus_sim.kubelet.KubeletConfig. The
    Job/EndpointSlice controllers (raybus_sim.controllers) run with it (as its config says);
    start_apiserver starts the node itself, an API client of this server's HTTP endpoint.
    watch_list: the WatchList feature gate (off in 1.33: watches with sendInitialEvents get 422).
    token_key: the ServiceAccount token signing key (default: random per start); a stack that
    restarts its API server passes the same key so its services' tokens stay valid."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    registry = new_registry()
    store = Store(registry, history_size=history_size)
    store.listeners.append(_crd_listener(store))
    state = ServerState(registry, store, watch_timeout=watch_timeout, bookmark_interval=bookmark_interval,
                        watch_list=watch_list)
    state.authenticator, state.authorizer = Authenticator(store, key=token_key), Authorizer(store)
    app[STATE] = state
    state.faults = ApiFaults()
    state_path = Path(state_file) if state_file else None
    if state_path and state_path.exists():
        load_state(store, state_path, registry.add_crd)
    _bootstrap(store)
    if crd_dir is not None:
        load_crd_dir(store, Path(crd_dir))
    # Watch history starts after the boot objects: older resourceVersions (e.g. 1) are "too old" (410),
    # as on a real server whose watch cache no longer holds them.
    store.base_rv = max(store.base_rv, store.rv)
    for resource_state in store.states.values():
        resource_state.window_start = max(resource_state.window_start, store.base_rv)
    gc = GarbageCollector(store, orphan_check_delay=orphan_check_delay)
    state.gc = gc
    controllers: list[Any] = []
    if kubelet is not False:
        from raybus_sim.controllers import EndpointSliceController, JobController
        from raybus_sim.kubelet import KubeletConfig  # late: kubelet imports this package

        config = kubelet if isinstance(kubelet, KubeletConfig) else KubeletConfig()
        app[NODE_CONFIG] = config
        store.graceful_pod_delete = True  # a kubelet confirms every deletion of a bound Pod
        if config.endpoint_slices:
            controllers.append(EndpointSliceController(store))
        if config.jobs:
            controllers.append(JobController(store))

    async def on_startup(_: web.Application) -> None:
        gc.start()
        for ctl in controllers:
            ctl.start()

    async def on_cleanup(_: web.Application) -> None:
        for ctl in controllers:
            await ctl.stop()
        await gc.stop()
        if state_path is not None:
            dump_state(store, state_path)

    async def on_shutdown(_: web.Application) -> None:
        store.close_watchers()

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
    app.router.add_route("*", "/{tail:.*}", dispatch)
    return app


@dataclass
class RunningApiServer:
    url: str
    app: web.Application
    runner: web.AppRunner
    node: Any = None  # the simulated node (raybus_sim.kubelet.node.SimNode), when started

    @property
    def store(self) -> Store:
        return self.app[STATE].store

    @property
    def state(self) -> ServerState:
        return self.app[STATE]

    async def stop(self) -> None:
        if self.node is not None:
            await self.node.stop()
        await self.runner.cleanup()

    def service_account_token(self, namespace: str, name: str, *, expiration_s: int = 3600) -> str:
        """A bearer token for system:serviceaccount:<namespace>:<name> (the ServiceAccount must exist);
        requests with it are authorized by RBAC, like the TokenRequest API's tokens."""
        return str(self.state.authenticator.mint(namespace, name, expiration_s=expiration_s)[0])


async def start_apiserver(host: str = "127.0.0.1", port: int = 0, **kwargs: Any) -> RunningApiServer:
    """Start on host:port (0 = pick a free port); kwargs go to create_app."""
    kwargs.setdefault("crd_dir", DEFAULT_CRD_DIR)
    app = create_app(**kwargs)
    # Long-lived watches must not be killed by the keep-alive/shutdown timeouts.
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    site = web.SockSite(runner, sock)
    await site.start()
    real_port = sock.getsockname()[1]
    server = RunningApiServer(url=f"http://{host}:{real_port}", app=app, runner=runner)
    config = app.get(NODE_CONFIG)
    if config is not None:
        # The simulated node is an API client like on a real control plane, of this server's own
        # HTTP endpoint (in-process: no extra process to start, and the same code path).
        from raybus_sim.kubelet.client import ClusterView
        from raybus_sim.kubelet.node import SimNode

        server.node = await SimNode.start(ClusterView.from_url(server.url, ADMIN_TOKEN), config)
        server.state.kubelet, server.state.sim_handler = server.node.kubelet, server.node.kubelet.handle_http
    return server


def write_kubeconfig(path: Path | str, url: str, *, namespace: str = "default", token: str = ADMIN_TOKEN) -> Path:
    """A kubeconfig usable by kubectl and kubernetes-asyncio. The default token is the admin's (full
    access, never authorized); pass a ServiceAccount token (RunningApiServer.service_account_token or the
    TokenRequest API) for an RBAC-checked identity."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "raybus-sim", "preferences": {},
        "clusters": [{"name": "raybus-sim", "cluster": {"server": url}}],
        "users": [{"name": "raybus-sim", "user": {"token": token}}],
        "contexts": [{"name": "raybus-sim", "context": {"cluster": "raybus-sim", "user": "raybus-sim",
                                                         "namespace": namespace}}],
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path
