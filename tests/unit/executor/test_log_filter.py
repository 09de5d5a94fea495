"""The executor hides only FastStream's benign idle-fetch restart, not real subscriber failures."""

from __future__ import annotations

import logging

import nats.errors

from command_executor.app import _idle_fetch_timeout


def _record(msg: str, exc: BaseException | None) -> logging.LogRecord:
    info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("faststream.command_executor", logging.ERROR, __file__, 1, msg, None, info)


def test_bare_timeout_from_an_idle_fetch_is_dropped() -> None:
    assert not _idle_fetch_timeout(_record("Task-7 raised an exception, retrying...", TimeoutError()))


def test_other_failures_are_kept() -> None:
    assert _idle_fetch_timeout(_record("Task-7 raised an exception, retrying...", ConnectionError("x")))
    assert _idle_fetch_timeout(_record("Task-7 raised an exception, retrying...",
                                       nats.errors.NoServersError()))
    assert _idle_fetch_timeout(_record("Task-7 raised an exception and won't be restarted.",
                                       TimeoutError()))
    assert _idle_fetch_timeout(_record("something else", None))
