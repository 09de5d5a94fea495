"""Encode/decode bus messages; anything undecodable goes to the dead-letter subject, counted."""

from __future__ import annotations

import logging
from typing import TypeVar

from nats.aio.client import Client as NATS
from pydantic import BaseModel, ValidationError

from raybus.bus import headers as h
from raybus.bus import subjects as s
from raybus.observability.metrics import DEAD_LETTERS
from raybus.observability.tracing import inject_headers

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger(__name__)


def encode(message: BaseModel) -> bytes:
    return message.model_dump_json(by_alias=True).encode()


def publish_headers(msg_id: str | None = None) -> dict[str, str]:
    extra = {h.MSG_ID: msg_id} if msg_id else {}
    return inject_headers(extra)


def _describe(exc: ValidationError) -> str:
    # Locations and error types only: pydantic's messages echo input values, which must not leak.
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['type']}" for e in exc.errors()[:5])[:1000]


async def decode_or_dead_letter(
    model: type[M], *, data: bytes, subject: str, nc: NATS, service: str
) -> M | None:
    """Return the decoded message, or publish the raw bytes to raybus.dlq.<service> and return None.

    The caller acks the original either way: a message that cannot be decoded will never decode,
    so redelivering it would only block the consumer.
    """
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        kind = subject.split(".")[1] if subject.count(".") >= 1 else "unknown"
        DEAD_LETTERS.labels(service=service, subject_kind=kind).inc()
        log.warning("dead-lettered undecodable message", extra={"subject": subject,
                                                                 "errors": exc.error_count()})
        await dead_letter(nc, service=service, subject=subject, data=data, error=_describe(exc))
        return None


async def dead_letter(nc: NATS, *, service: str, subject: str, data: bytes, error: str,
                      headers: dict[str, str] | None = None) -> None:
    """Put a message a consumer will never process on raybus.dlq.<service>, saying why."""
    await nc.jetstream().publish(s.dead_letter_subject(service), data,
                                 headers={h.DLQ_SUBJECT: subject, h.DLQ_ERROR: error[:1000], **(headers or {})})
