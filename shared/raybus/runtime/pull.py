"""A pool of workers on one durable JetStream pull consumer, for services that execute work items
(the command executor, the dashboard-poller's commands).

Why not FastStream's concurrent pull subscriber: it fetches a batch and parks up to `max_workers`
fetched messages in an in-memory buffer before a worker takes them; a parked message gets no
in-progress acks, so with a short ack_wait JetStream redelivers it while it still waits here. This
pool fetches only as many messages as it has free workers, and every message it holds is under a
heartbeat (`in_progress` every ack_wait/3) until its handler acks or naks it. ack_wait can then be
a few seconds: that is how long a dead replica's work waits before another replica gets it.

The handler owns acknowledgement (explicit ack policy): it must ack, nak or term every message.
A handler that raises is logged and its message nak'ed with a delay, never dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig
from nats.js.errors import FetchTimeoutError, NotFoundError

from raybus.runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)
Handler = Callable[[Msg], Awaitable[None]]


async def consumer_lost(js: JetStreamContext, stream: str, name: str) -> bool:
    """Did the durable consumer a fetch failed on disappear? (A pull from a deleted consumer fails
    with 503 forever; its owner re-creates it, since no other role may.)"""
    try:
        await js.consumer_info(stream, name)
    except NotFoundError:
        return True
    except Exception:  # noqa: BLE001 - NATS unreachable or electing: not known to be lost
        return False
    return False


class PullWorkers:
    def __init__(self, nc: NATS, *, stream: str, config: ConsumerConfig, handler: Handler,
                 concurrency: int, name: str, nak_delay_s: float = 1.0) -> None:
        self._nc = nc
        self._stream = stream
        self._config = config
        self._handler = handler
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._concurrency = max(1, concurrency)
        self._name = name
        self._nak_delay = nak_delay_s
        self._heartbeat_s = max(0.2, float(config.ack_wait or 30.0) / 3)
        self._loop: asyncio.Task[None] | None = None
        self._active: set[asyncio.Task[None]] = set()
        self.idle = asyncio.Event()  # set while no handler runs (nor a fetched message waits for one)
        self.idle.set()
        self.handled = 0  # messages whose handler finished (observable for tests)

    async def start(self) -> None:
        js = self._nc.jetstream()
        await js.add_consumer(self._stream, self._config)  # idempotent; updates editable fields
        self._loop = asyncio.create_task(self._fetch_loop())

    async def stop(self) -> None:
        """Stop fetching, let handlers in progress finish briefly, then cancel the rest (their
        messages are redelivered after ack_wait: nothing is lost)."""
        if self._loop is not None:
            await cancel_and_wait([self._loop])
            self._loop = None
        if self._active:
            await asyncio.wait(set(self._active), timeout=2.0)
        await cancel_and_wait(list(self._active))

    async def _bind(self) -> JetStreamContext.PullSubscription:
        js = self._nc.jetstream()
        return await js.pull_subscribe_bind(durable=self._config.durable_name or "", stream=self._stream)

    async def _fetch_loop(self) -> None:
        js = self._nc.jetstream()
        psub = await self._bind()
        try:
            while True:
                await self._slots.acquire()  # fetch only for a free worker...
                free = 1
                while free < self._concurrency and not self._slots.locked():
                    await self._slots.acquire()  # ...and as many as are free right now
                    free += 1
                try:
                    msgs = await psub.fetch(free, timeout=1.0)
                except (FetchTimeoutError, NatsTimeout, TimeoutError):
                    msgs = []  # idle: nats-py raises asyncio's TimeoutError here too
                except asyncio.CancelledError:
                    for _ in range(free):
                        self._slots.release()
                    raise
                except Exception:
                    log.warning("fetch failed; retrying", exc_info=True, extra={"consumer": self._name})
                    msgs = []
                    await asyncio.sleep(1.0)
                    if await consumer_lost(js, self._stream, self._config.durable_name or ""):
                        log.warning("consumer lost; creating it again", extra={"consumer": self._name})
                        with contextlib.suppress(Exception):
                            await js.add_consumer(self._stream, self._config)
                            with contextlib.suppress(Exception):
                                await psub.unsubscribe()
                            psub = await self._bind()
                for _ in range(free - len(msgs)):
                    self._slots.release()
                for msg in msgs:
                    task = asyncio.create_task(self._run(msg))
                    self._active.add(task)
                    self.idle.clear()
                    task.add_done_callback(self._finished)
        finally:
            with contextlib.suppress(Exception):
                await psub.unsubscribe()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._active.discard(task)
        if not self._active:
            self.idle.set()

    async def _run(self, msg: Msg) -> None:
        beat = asyncio.create_task(self._heartbeat(msg))
        try:
            await self._handler(msg)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("handler failed; redelivering", extra={"consumer": self._name,
                                                                 "subject": msg.subject})
            with contextlib.suppress(Exception):
                await msg.nak(delay=self._nak_delay)
        finally:
            await cancel_and_wait([beat])
            self._slots.release()
            self.handled += 1

    async def _heartbeat(self, msg: Msg) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            with contextlib.suppress(Exception):
                await msg.in_progress()
