"""What every raybus service process shares: logging, tracing, the metrics endpoint, the event
loop, signal handling. Settings come from runtime.settings; each service's `create_app(settings)`
returns a `Service`."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import threading
from collections.abc import Sequence
from typing import Protocol

import uvloop

from raybus.observability.logging import setup_logging
from raybus.observability.metrics import serve_metrics, set_ready
from raybus.observability.tracing import setup_tracing, shutdown_tracing
from raybus.runtime.reachable import Need, wait_until_reachable
from raybus.runtime.settings import GC_GEN0, RaybusSettings

__all__ = ["GC_GEN0", "STOP_GRACE_S", "Service", "run_service", "serve", "tune_gc"]

STOP_GRACE_S = 8.0


class Service(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


def _hard_exit(log: logging.Logger) -> None:
    log.error("process did not exit after stopping; exiting anyway")
    logging.shutdown()
    os._exit(1)


async def _start(settings: RaybusSettings, app: Service, needs: Sequence[Need],
                 log: logging.Logger) -> None:
    await wait_until_reachable(needs, nats_url=getattr(settings, "nats_url", ""),
                               redis_url=getattr(settings, "redis_url", ""),
                               kubeconfig=getattr(settings, "kubeconfig", None), log=log,
                               auth=getattr(settings, "auth", None))
    await app.start()


def tune_gc(gen0: int) -> None:
    """Fewer collections, and none over what start-up built (modules, pydantic schemas, the
    Kubernetes client's thousands of model classes): gc.freeze moves them out of every later
    collection. Older generations keep CPython's ratios."""
    if gen0 <= 0:
        return
    gc.freeze()
    gc.set_threshold(gen0, 10, 10)


def serve(settings: RaybusSettings, app: Service, *, needs: Sequence[Need] = ("nats",)) -> None:
    """A service process's main: run_service on the event loop the settings name."""
    tune_gc(settings.gc_gen0)
    factory = uvloop.new_event_loop if settings.event_loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run_service(settings, app, needs=needs))


async def run_service(settings: RaybusSettings, app: Service, *, needs: Sequence[Need] = ("nats",)) -> None:
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
