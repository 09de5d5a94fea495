"""What every raybus service process shares: settings from flags/env, logging, tracing,
metrics endpoint, signal handling. Each service's `create_app(settings)` returns a `Service`."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import socket
import threading
import uuid
from collections.abc import Sequence
from typing import Literal, Protocol

import uvloop
from pydantic import BaseModel, ConfigDict

from raybus.bus.connect import BusAuth
from raybus.observability.logging import setup_logging
from raybus.observability.metrics import serve_metrics, set_ready
from raybus.observability.tracing import setup_tracing, shutdown_tracing
from raybus.runtime.reachable import Need, wait_until_reachable

STOP_GRACE_S = 8.0
GC_GEN0 = 50_000  # CommonSettings.gc_gen0's default (why: there)


class Service(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


class CommonSettings(BaseModel):
    model_config = ConfigDict(frozen=True)
    service: str
    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    kubeconfig: str | None = None  # None: in-cluster config
    metrics_port: int = 0
    # Where /metrics, /healthz and /readyz listen: hosts, comma-separated (KubeRay's
    # --metrics-addr names the address too). A Pod binds its own IP (deploy/kustomize).
    metrics_addr: str = "127.0.0.1"
    log_level: str = "INFO"
    replica_id: str = ""
    partitions: int = 16
    debounce_s: float = 0.1  # reconcilers: how long a trigger waits for the events after it
    # reconcilers: a key woken by events runs at most once per this many seconds (workqueue.py);
    # None: the controller's default (the RayCluster controller 1 s, the others 0)
    min_interval_s: float | None = None
    auth: BusAuth = BusAuth()  # NATS/Redis users, password files, CA (docs/security.md)
    # Declare streams and KV buckets at start (a dev bus). A secured bus has `bus-admin` declare
    # them once; services then only wait for them (their users may not change a stream).
    bus_declare: bool = True
    # uvloop: libuv's loop, and its transports (TLS included) in C. Every bus message is a socket
    # write and a wake-up; on asyncio's own loop that plumbing was the largest item in every
    # service's profile. "asyncio" keeps the standard loop.
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"
    # CPython's cyclic GC runs a young collection every 700 container allocations; one decoded
    # Pod is hundreds of dicts and lists, so at 1,000 clusters the collector took a fifth of the
    # command-executor's CPU (py-spy --native). Our objects are freed by reference
    # counting (JSON trees have no cycles), so collect young objects 1 in gc_gen0 allocations.
    # 0: CPython's defaults.
    gc_gen0: int = GC_GEN0


def _hard_exit(log: logging.Logger) -> None:
    log.error("process did not exit after stopping; exiting anyway")
    logging.shutdown()
    os._exit(1)


async def _start(settings: CommonSettings, app: Service, needs: Sequence[Need],
                 log: logging.Logger) -> None:
    await wait_until_reachable(needs, nats_url=settings.nats_url, redis_url=settings.redis_url,
                               kubeconfig=settings.kubeconfig, log=log, auth=settings.auth)
    await app.start()


def _env(name: str, default: str | None) -> str | None:
    return os.environ.get(f"RAYBUS_{name}", default)


def common_parser(service: str) -> argparse.ArgumentParser:
    """Flags with RAYBUS_* environment defaults (containers set env, humans pass flags)."""
    parser = argparse.ArgumentParser(prog=service)
    parser.add_argument("--nats-url", default=_env("NATS_URL", "nats://127.0.0.1:4222"))
    parser.add_argument("--redis-url", default=_env("REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--kubeconfig", default=_env("KUBECONFIG", None))
    parser.add_argument("--metrics-port", type=int, default=int(_env("METRICS_PORT", "0") or 0))
    parser.add_argument("--metrics-addr", default=_env("METRICS_ADDR", "127.0.0.1"),
                        help="host(s) the metrics and probe endpoint binds to, comma-separated")
    parser.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    parser.add_argument("--replica-id", default=_env("REPLICA_ID", ""))
    parser.add_argument("--partitions", type=int, default=int(_env("PARTITIONS", "16") or 16))
    parser.add_argument("--debounce-s", type=float, default=float(_env("DEBOUNCE_S", "0.1") or 0.1),
                        help="reconcilers: fold the events that follow a trigger within this delay")
    interval = _env("MIN_INTERVAL_S", None)
    parser.add_argument("--min-interval-s", type=float,
                        default=float(interval) if interval else None,
                        help="reconcilers: an object woken by events runs at most once per this "
                             "many seconds (default: RayCluster 1, RayJob/RayService 0)")
    # Credentials by reference (files a Secret mounts), docs/security.md.
    for name in ("NATS_USER", "NATS_PASSWORD_FILE", "NATS_CA_FILE", "REDIS_USER",
                 "REDIS_PASSWORD_FILE", "REDIS_CA_FILE"):
        parser.add_argument("--" + name.lower().replace("_", "-"), default=_env(name, None))
    parser.add_argument("--event-loop", choices=("uvloop", "asyncio"), default=_env("EVENT_LOOP", "uvloop"),
                        help="uvloop (default) or asyncio's own loop")
    parser.add_argument("--gc-gen0", type=int, default=int(_env("GC_GEN0", str(GC_GEN0)) or 0),
                        help="allocations between young GC collections (0: CPython's 700)")
    parser.add_argument("--bus-declare", default=_env("BUS_DECLARE", "1"),
                        help="1: declare streams/buckets at start; 0: wait for bus-admin's")
    return parser


def common_settings(service: str, args: argparse.Namespace) -> CommonSettings:
    replica = args.replica_id or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
    return CommonSettings(service=service, nats_url=args.nats_url, redis_url=args.redis_url,
                          kubeconfig=args.kubeconfig, metrics_port=args.metrics_port,
                          metrics_addr=args.metrics_addr,
                          log_level=args.log_level, replica_id=replica, partitions=args.partitions,
                          debounce_s=args.debounce_s, min_interval_s=args.min_interval_s,
                          auth=BusAuth(nats_user=args.nats_user, nats_password_file=args.nats_password_file,
                                       nats_ca_file=args.nats_ca_file, redis_user=args.redis_user,
                                       redis_password_file=args.redis_password_file,
                                       redis_ca_file=args.redis_ca_file),
                          bus_declare=str(args.bus_declare).lower() not in ("0", "false", "no"),
                          event_loop=args.event_loop, gc_gen0=args.gc_gen0)


def tune_gc(gen0: int) -> None:
    """Fewer collections, and none over what start-up built (modules, pydantic schemas, the
    Kubernetes client's thousands of model classes): gc.freeze moves them out of every later
    collection. Older generations keep CPython's ratios."""
    if gen0 <= 0:
        return
    gc.freeze()
    gc.set_threshold(gen0, 10, 10)


def serve(settings: CommonSettings, app: Service, *, needs: Sequence[Need] = ("nats",)) -> None:
    """A service process's main: run_service on the event loop the settings name."""
    tune_gc(settings.gc_gen0)
    factory = uvloop.new_event_loop if settings.event_loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run_service(settings, app, needs=needs))


async def run_service(settings: CommonSettings, app: Service, *, needs: Sequence[Need] = ("nats",)) -> None:
    """Run `app` until SIGTERM/SIGINT; it starts once every one of `needs` answers."""
    log = setup_logging(settings.service, settings.log_level)
    setup_tracing(settings.service, instance=settings.replica_id)
    metrics = await serve_metrics(settings.metrics_port, settings.metrics_addr)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # A start that cannot finish (NATS or Redis down: clients reconnect forever) must not make
    # the process deaf to SIGTERM: race it against the signal.
    starting = asyncio.ensure_future(_start(settings, app, needs, log))
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if starting.done():
        starting.result()
        set_ready(True)
        log.info("started", extra={"replica": settings.replica_id})
        await stopped
        set_ready(False)
    else:
        log.info("stop requested while starting")
        starting.cancel()
    log.info("stopping")
    # asyncio.run() cancels and awaits every task left after we return; a client task that
    # swallows its cancel (nats-py reconnecting to a NATS that is gone) would hang the exit.
    # Nothing of value is lost by a hard exit after the grace (leases expire, unacked work is
    # redelivered), so a watchdog thread guarantees it.
    watchdog = threading.Timer(STOP_GRACE_S + 2.0, _hard_exit, args=(log,))
    watchdog.daemon = True
    watchdog.start()
    # Bounded, well inside Kubernetes' 30 s default grace period: nothing of value is lost by a
    # hard exit (leases expire, unacked messages are redelivered), while a stop that hangs would
    # keep a partition's lease renewed-but-unserved until SIGKILL.
    stopping = asyncio.ensure_future(app.stop())
    done, _ = await asyncio.wait({stopping}, timeout=STOP_GRACE_S)
    if not done:
        log.error("stop did not finish; exiting anyway", extra={"grace_s": STOP_GRACE_S})
        logging.shutdown()
        os._exit(1)
    stopping.result()
    if metrics is not None:
        await metrics.cleanup()
    shutdown_tracing()
