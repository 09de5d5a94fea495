"""Kubernetes / Go time formatting for RayJob status and messages.

Status timestamps are metav1.Time: RFC 3339, second precision, UTC (``YYYY-MM-DDThh:mm:ssZ``).
Every deadline is derived from these persisted timestamps and the caller's ``now``, never from a
process timer, so a restarted reconciler fires TTLs and deadlines on time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def fmt_time(dt: datetime) -> str:
    """metav1.Time's JSON form (RFC 3339, seconds, UTC)."""
    return utc(dt).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> datetime | None:
    """Parse a metav1.Time / RFC 3339 string; None for anything else (a missing/garbled field)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return utc(datetime.fromisoformat(value))
    except ValueError:
        return None


def from_unix_ms(ms: int) -> datetime:
    """time.UnixMilli (the dashboard's start_time / end_time)."""
    return EPOCH + timedelta(milliseconds=ms)


def go_time_string(dt: datetime) -> str:
    """fmt's %v of a metav1.Time (time.Time.String) for a UTC second-precision time."""
    return utc(dt).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def go_date_time(dt: datetime) -> str:
    """Go's time.DateTime layout: "YYYY-MM-DD hh:mm:ss" (Go writes it as its reference time)."""
    return utc(dt).strftime("%Y-%m-%d %H:%M:%S")


def seconds_until(deadline: datetime, now: datetime) -> float:
    return max(0.0, (utc(deadline) - utc(now)).total_seconds())
