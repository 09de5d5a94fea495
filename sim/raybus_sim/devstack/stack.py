"""The local stack as a reusable object: `raybus up`, the end-to-end tests and the benchmarks
all start exactly the same processes the same way."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raybus.bus import declare as bus_declare
from raybus.bus import security
from raybus.bus.permissions import SERVICE_ROLES, Role
from raybus.bus.streams import BusSettings
from raybus.runtime.settings import process_environment
from raybus_sim.testing.servers import (
    NatsCluster,
    NatsServer,
    RedisServer,
    die_with_parent,
    free_port,
    free_ports,
    start_nats,
    start_nats_cluster,
    start_redis,
    stop_process,
)

SERVICES = ["watcher", "command_executor", "cluster_reconciler", "job_reconciler",
            "service_reconciler", "dashboard_poller"]
# The services that talk to Kubernetes, and their ServiceAccounts in the kustomize base's RBAC.
SERVICE_ACCOUNTS = {"watcher": "raybus-watcher", "command_executor": "raybus-command-executor",
                    "dashboard_poller": "raybus-dashboard-poller"}
RBAC_MANIFEST = Path(__file__).resolve().parents[3] / "deploy" / "kustomize" / "base" / "rbac.yaml"
# Where the Ray heads answer: the simulator's by default, a real head's (`ray start --head`) when
# the user's environment or `raybus up --dashboard-url-template/--proxy-url-template` says so.
HEAD_TEMPLATES = ("RAYBUS_DASHBOARD_URL_TEMPLATE", "RAYBUS_PROXY_URL_TEMPLATE")


def stack_env(defaults: dict[str, str], environ: Mapping[str, str], overrides: dict[str, str]) -> dict[str, str]:
    """The stack's own settings: `overrides` (flags, extra_env) > the user's environment for the
    head templates > the simulator's defaults. Everything else of ours (NATS, Redis, kubeconfig)
    always names this stack's servers, whatever the environment says."""
    env = dict(defaults)
    env.update({k: environ[k] for k in HEAD_TEMPLATES if environ.get(k)})
    env.update(overrides)
    return env


@dataclass
class Proc:
    name: str
    argv: list[str]
    popen: subprocess.Popen[bytes]
    log: Path
    log_offset: int = 0  # where this process's output starts in its (append-mode) log
    metrics_port: int = 0  # its Prometheus endpoint on 127.0.0.1 (0: none)


@dataclass
class LocalStack:
    home: Path
    replicas: int = 1
    services: list[str] = field(default_factory=lambda: list(SERVICES))
    extra_env: dict[str, str] = field(default_factory=dict)
    nats: NatsServer | NatsCluster | None = None
    # 3: a JetStream cluster on loopback with every stream and KV bucket on all nodes
    # (RAYBUS_STREAM_REPLICAS), as the install runs it; services get every node's address.
    nats_nodes: int = 1
    redis: RedisServer | None = None
    procs: list[Proc] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    api_port: int = 0
    dashboard_port: int = 0
    rbac: bool = True  # watcher/executor use their ServiceAccounts' RBAC-checked tokens
    # An admin kubeconfig of a real API server (e.g. raybus_sim.testing.envtest's): then no local API
    # server is started; kube-sim runs only the simulated node and dashboards against that cluster
    # (its kube-controller-manager runs the Job/EndpointSlice controllers) and installs the CRDs
    # and the RBAC of RBAC_MANIFEST there, handing each service a TokenRequest token.
    apiserver_kubeconfig: Path | None = None
    # NATS with TLS and one user per service (bus/permissions.py), Redis with ACL users; the
    # material lives in <home>/secrets (docs/security.md). Off only for tests that need a
    # bare bus.
    secure: bool = True
    # Job ends pushed by the heads (decisions/ray_events.py): the poller's receiver port (0: off).
    ray_events_port: int = 0

    @property
    def secrets(self) -> Path | None:
        return (self.home / "secrets").resolve() if self.secure else None

    @property
    def kubeconfig(self) -> Path:
        """The admin's kubeconfig (what a user's kubectl uses)."""
        return (self.home / "kubeconfig").resolve()

    def service_kubeconfig(self, service: str) -> Path:
        """The kubeconfig of a service's ServiceAccount (RBAC-checked, as deployed)."""
        return (self.home / f"kubeconfig-{service}").resolve()

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def sim_url(self) -> str:
        """The simulated node's fault API (/sim/pods/..., /sim/delays, ...) and the dashboards'
        control API (/sim/dashboards/...), whichever API server the node serves."""
        return self.dashboard_url

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def start(self) -> None:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        if self.secure:
            security.generate(self.home / "secrets")
        replicas: dict[str, str] = {}
        if self.nats_nodes > 1:
            self.nats = start_nats_cluster(self.home / "nats", n=self.nats_nodes, secrets=self.secrets)
            replicas = {"RAYBUS_STREAM_REPLICAS": str(self.nats_nodes)}
        else:
            self.nats = start_nats(self.home / "nats", secrets=self.secrets)
        self.redis = start_redis(self.home / "redis", secrets=self.secrets)
        if self.secure:
            declare_bus(self.nats.options(Role.BUS_ADMIN.value), replicas=max(1, self.nats_nodes))
        self.api_port, self.dashboard_port, self.ray_events_port = free_ports(3)
        self.env = stack_env({
            "RAYBUS_NATS_URL": self.nats.url, "RAYBUS_REDIS_URL": self.redis.url,
            "RAYBUS_KUBECONFIG": str(self.kubeconfig),
            "RAYBUS_DASHBOARD_URL_TEMPLATE": f"{self.dashboard_url}/{{namespace}}/{{cluster}}",
            # the simulated heads' Serve proxies (a real head: http://{pod_ip}:{port})
            "RAYBUS_PROXY_URL_TEMPLATE": f"{self.dashboard_url}/{{namespace}}/{{cluster}}/serve",
            **replicas,
        }, process_environment(), self.extra_env)
        (self.home / "env").write_text("".join(f"{k}={v}\n" for k, v in self.env.items()))
        # The watcher and the command-executor run with their ServiceAccounts' tokens, bound to
        # the ClusterRoles of deploy/kustomize/base/rbac.yaml: every missing permission shows up here, as
        # a real cluster would refuse it, not only in production.
        rbac: list[str] = []
        if self.rbac:
            rbac = ["--rbac-manifest", str(RBAC_MANIFEST)]
            if self.apiserver_kubeconfig is None:
                rbac += ["--token-key-file", str((self.home / "token.key").resolve())]
            for service, account in SERVICE_ACCOUNTS.items():
                rbac += ["--sa-kubeconfig", f"raybus-system/{account}={self.service_kubeconfig(service)}"]
        if self.apiserver_kubeconfig is not None:
            self.kubeconfig.write_text(Path(self.apiserver_kubeconfig).read_text())
            self.kubeconfig.chmod(0o600)
            where = ["--apiserver-kubeconfig", str(self.kubeconfig)]
        else:
            where = ["--port", str(self.api_port), "--kubeconfig", str(self.kubeconfig),
                     "--state-file", str(self.home / "apiserver-state.json")]
        sim = self.spawn("kube-sim", ["-m", "raybus_sim", "--dashboard-port", str(self.dashboard_port),
                                      *where, *rbac])
        wait_for_line(sim, "kube-sim ready")
        started = []
        for service in self.services:
            count = self.replicas if service.endswith("reconciler") else 1
            for i in range(count):
                name = service.replace("_", "-") + (f"-{i}" if count > 1 else "")
                started.append(self.spawn(name, ["-m", service, "--replica-id", name]))
        for proc in started:
            self._wait_started(proc)

    def _wait_started(self, proc: Proc) -> Proc:
        """Wait for a service's "started"; one that lost its metrics port to another process between
        free_port() and its bind (a busy machine) is started again on another port."""
        for attempt in range(3):
            try:
                wait_for_line(proc, '"started"')
                return proc
            except RuntimeError:
                if attempt == 2 or b"Address already in use" not in proc.log.read_bytes()[proc.log_offset:]:
                    raise
                self.procs.remove(proc)
                proc = self.spawn(proc.name, proc.argv[1:])
        raise AssertionError("unreachable")

    def ray_events_key(self) -> str:
        """The key the per-cluster tokens derive from: made once per home (0600, beside the bus
        secrets, never in `<home>/env` or a log), so heads built by an earlier run stay valid."""
        path = self.home / "ray-events.key"
        if not path.exists():
            path.write_text(secrets.token_hex(32))
            path.chmod(0o600)
        return path.read_text().strip()

    def _ray_events_env(self, service: str, env: Mapping[str, str]) -> dict[str, str]:
        """On in the local stack (the simulated heads push, and a real head on loopback can):
        the poller listens on loopback, the cluster-reconciler builds head Pods that push there.
        A RAYBUS_RAY_EVENTS_KEY from the environment wins; RAYBUS_RAY_EVENTS_URL="" turns it off."""
        out = {"RAYBUS_RAY_EVENTS_KEY": env.get("RAYBUS_RAY_EVENTS_KEY") or self.ray_events_key()}
        if service == "dashboard_poller":
            out.update(RAYBUS_RAY_EVENTS_HOST="127.0.0.1", RAYBUS_RAY_EVENTS_PORT=str(self.ray_events_port))
        elif "RAYBUS_RAY_EVENTS_URL" not in env:
            out["RAYBUS_RAY_EVENTS_URL"] = f"http://127.0.0.1:{self.ray_events_port}"
        return out

    def spawn(self, name: str, args: list[str]) -> Proc:
        log = self.home / "logs" / f"{name}.log"
        argv = [sys.executable, *args]
        env = {**process_environment(), **self.env}
        service = args[1] if len(args) > 1 and args[0] == "-m" else ""
        metrics_port = 0
        if service in SERVICES:  # each service's Prometheus endpoint, on loopback
            metrics_port = free_port()
            env.update(RAYBUS_METRICS_PORT=str(metrics_port), RAYBUS_METRICS_ADDR="127.0.0.1")
        if self.secrets is not None and service in SERVICE_ROLES:
            env.update(security.service_env(self.secrets, SERVICE_ROLES[service]),
                       RAYBUS_BUS_DECLARE="0")
        # The executor rebuilds head Pods to admit them: it needs what the cluster-reconciler builds with.
        if service in ("dashboard_poller", "cluster_reconciler", "command_executor") and self.ray_events_port:
            env.update(self._ray_events_env(service, env))
        if self.rbac and service in SERVICE_ACCOUNTS:
            env["RAYBUS_KUBECONFIG"] = str(self.service_kubeconfig(service))
        offset = log.stat().st_size if log.exists() else 0
        # Own session: a terminal's Ctrl-C reaches `raybus up`, which stops children in order.
        # die_with_parent: if `raybus up` itself is killed, the children go too.
        with log.open("ab") as out:
            popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True,
                                     preexec_fn=die_with_parent())  # noqa: PLW1509 - prctl only, no locks
        proc = Proc(name=name, argv=argv, popen=popen, log=log, log_offset=offset,
                    metrics_port=metrics_port)
        self.procs.append(proc)
        return proc

    def proc(self, name: str) -> Proc:
        return next(p for p in self.procs if p.name == name)

    def restart(self, name: str, *, kill: bool = False) -> Proc:
        """Stop one process (SIGKILL with kill=True) and start it again with the same argv."""
        old = self.proc(name)
        stop_proc(old, kill=kill)
        self.procs.remove(old)
        new = self.spawn(name, old.argv[1:])
        if name == "kube-sim":
            wait_for_line(new, "ready")
            return new
        return self._wait_started(new)

    def stop(self) -> None:
        """Services first (all at once, then wait for each), then the simulator, then Redis and
        NATS: a service still stopping may write to Kubernetes or ack on the bus, and must find
        them there (a NATS server gone first makes it log `nats: unexpected EOF` errors)."""
        services = [p for p in self.procs if p.argv[1:3] in (["-m", s] for s in SERVICES)]
        rest = [p for p in self.procs if p not in services]
        for tier in (services, rest):
            for proc in reversed(tier):
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.terminate()
            for proc in reversed(tier):
                stop_proc(proc)
        if self.redis is not None:
            self.redis.stop()
        if self.nats is not None:
            self.nats.stop()


def declare_bus(options: dict[str, Any], *, replicas: int = 1) -> None:
    """`raybus bus-init` from synchronous code (the stack starts before any event loop runs)."""
    asyncio.run(bus_declare.declare_bus(options, BusSettings(replicas=replicas)))


def stop_proc(proc: Proc, *, kill: bool = False) -> None:
    stop_process(proc.popen, kill=kill)


def wait_for_line(proc: Proc, needle: str, timeout: float = 60.0) -> None:
    """Wait for `needle` in what this process wrote: logs are appended across runs, and a line
    from an earlier run must never count as this one being ready."""
    start = proc.log_offset
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited ({proc.popen.returncode}); see {proc.log}")
        if proc.log.exists():
            with proc.log.open("rb") as f:
                f.seek(start)
                if needle.encode() in f.read():
                    return
        time.sleep(0.05)
    raise TimeoutError(f"{proc.name} not ready after {timeout}s; see {proc.log}")
