"""Stopping background tasks so that shutdown can't hang.

One `task.cancel()` is not enough on Python 3.11: `asyncio.wait_for` (used inside nats-py's fetch
and next_msg) swallows a cancellation that races with its own timeout (CPython gh-86296, fixed in
3.12 only), and the loop around it then runs on. So cancel again until the task ends, and never
`await task` under `suppress(CancelledError)`: that would also swallow the *caller's* own
cancellation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], *, timeout_s: float = 10.0,
                          retry_s: float = 0.2) -> None:
    """Cancel `tasks` and wait until they have ended, re-cancelling any that ignored it."""
    every = list(tasks)
    pending = {t for t in every if not t.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            log.error("tasks did not stop", extra={"tasks": [t.get_name() for t in pending]})
            return
        _, pending = await asyncio.wait(pending, timeout=min(retry_s, left))
    _retrieve(every)


def _retrieve(tasks: list[asyncio.Task[Any]]) -> None:
    # A stopped task's exception is of no further use, but unretrieved it is logged at exit.
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.debug("stopped task had failed", exc_info=task.exception())
