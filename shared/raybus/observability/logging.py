"""Structured JSON logs on stderr, one object per line, with the service name and trace ids."""

from __future__ import annotations

import logging
import sys

from opentelemetry import trace
from pythonjsonlogger.json import JsonFormatter


class _TraceIds(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        ctx = trace.get_current_span().get_span_context()
        record.trace_id = format(ctx.trace_id, "032x") if ctx.is_valid else None
        record.span_id = format(ctx.span_id, "016x") if ctx.is_valid else None
        return True


def setup_logging(service: str, level: str = "INFO") -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "ts", "levelname": "level", "name": "logger"},
        static_fields={"service": service},
    ))
    handler.addFilter(_TraceIds())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("nats", "aiohttp.access", "httpx", "faststream"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    quiet_tls_close_notice()
    return logging.getLogger(service)


def quiet_tls_close_notice() -> None:
    logger = logging.getLogger("asyncio")
    if _tls_close_notice not in logger.filters:
        logger.addFilter(_tls_close_notice)


def _tls_close_notice(record: logging.LogRecord) -> bool:
    """asyncio warns on every TLS connection a peer closes first (nats-py's protocol returns True
    from eof_received); on a TLS bus that is each reconnect, and says nothing an operator can act on."""
    return "eof_received() has no effect when using ssl" not in record.getMessage()
