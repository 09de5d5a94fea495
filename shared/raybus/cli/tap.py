"""`raybus tap [filter]`: a live, readable view of bus traffic.

The filter is a subject pattern (`raybus.cmd.>`) or a shorthand (`obj`, `trigger`, `cmd`, `status`,
`outcome`, `dash`, `dlq`, optionally followed by more tokens: `obj pod`). Plain NATS
subscription: tapping never consumes or acks anything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats.errors

from raybus.bus import subjects as s
from raybus.bus.connect import BusAuth, connect_nats
from raybus.runtime.reachable import redact
from raybus.runtime.settings import CliSettings

SHORTHANDS = {"obj", "trigger", "cmd", "status", "outcome", "dash", "dlq"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("tap", help="print bus traffic as it happens",
                       description="Print one line per bus message (time, subject, kind, key, summary; "
                       "never object bodies). Plain NATS subscription: tapping consumes nothing.")
    p.add_argument("filter", nargs="*",
                   help=f"a subject pattern (raybus.cmd.>) or a shorthand ({', '.join(sorted(SHORTHANDS))}) "
                        "with more tokens if wanted (obj pod); default: everything")
    p.add_argument("--nats-url", default=None,
                   help="NATS server(s), comma-separated; default: make run's, from .raybus/env, "
                        "else nats://127.0.0.1:4222")
    p.add_argument("--count", type=_non_negative(int), default=0, metavar="N",
                   help="stop after N messages (exit 1 if the timeout comes first)")
    p.add_argument("--timeout", type=_non_negative(float), default=0.0, metavar="S",
                   help="stop after S seconds (0: never)")
    p.add_argument("--json", action="store_true", help="print one JSON object per message")
    p.set_defaults(func=main)


def _non_negative(kind: type[int | float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be 0 or more: {text!r}")
        return value
    return parse


class BadFilter(ValueError):
    """The filter is not a NATS subject pattern under raybus. nor a shorthand."""


def main(args: argparse.Namespace) -> int:
    try:
        subject = subject_filter(args.filter)
    except BadFilter as exc:
        print(f"raybus tap: {exc}", file=sys.stderr)
        return 1
    return asyncio.run(run(args, subject))


def _check_pattern(pattern: str) -> str:
    """A NATS subject pattern: dot-separated non-empty tokens without spaces, `*` only as a
    whole token, `>` only as the last one."""
    tokens = pattern.split(".")
    for i, token in enumerate(tokens):
        if not token or any(c.isspace() for c in token):
            raise BadFilter(f"{pattern!r} is not a subject pattern: empty token or space")
        if ("*" in token and token != "*") or (">" in token and (token != ">" or i != len(tokens) - 1)):
            raise BadFilter(f"{pattern!r} is not a subject pattern: '*' stands for a whole token and "
                            "'>' only for the last")
    return pattern


def subject_filter(words: list[str]) -> str:
    """The subject pattern a filter means; BadFilter when it means none."""
    if not words:
        return f"{s.PREFIX}.>"
    if len(words) == 1 and (words[0].startswith(f"{s.PREFIX}.") or words[0] == ">"):
        return _check_pattern(words[0])
    if words[0] in SHORTHANDS:
        return _check_pattern(".".join([s.PREFIX, *words, ">"]))
    raise BadFilter(f"unknown filter {' '.join(words)!r}: give a subject pattern starting with "
                    f"'{s.PREFIX}.' or one of {', '.join(sorted(SHORTHANDS))}")


def summarize(subject: str, data: bytes) -> dict[str, Any]:
    """Subject, key, kind and a one-line summary; never the object body (it may hold env)."""
    parts = subject.split(".")
    row: dict[str, Any] = {"subject": subject, "category": parts[1] if len(parts) > 1 else "?"}
    try:
        body = json.loads(data)
    except ValueError:
        row["summary"] = f"<{len(data)} undecodable bytes>"
        return row
    if not isinstance(body, dict):
        row["summary"] = f"<{type(body).__name__}>"
        return row
    key = body.get("key") or {}
    row["key"] = f"{key.get('namespace', '?')}/{key.get('name', '?')}" if key else "-"
    row["kind"] = body.get("kind", "-")
    if "type" in body and "object" in body:
        obj = body.get("object") or {}
        phase = (obj.get("status") or {}).get("phase") or (obj.get("status") or {}).get("state")
        row["summary"] = f"{body['type']} rv={body.get('resource_version')}" + (
            f" {phase}" if phase else "")
    elif "commands" in body:
        ops = [f"{c.get('op')}:{c.get('event_reason') or c.get('reason', '')[:40]}"
               for c in body["commands"]]
        row["summary"] = f"{len(ops)} commands " + ", ".join(ops[:6])
    elif "results" in body:
        bad = [r for r in body["results"] if not r.get("ok")]
        row["summary"] = f"{len(body['results'])} results, {len(bad)} failed"
    elif "controller" in body:
        row["summary"] = f"look again ({body.get('cause', '')}) seq={body.get('objects_seq')}"
    else:
        row["summary"] = ",".join(sorted(body)[:6])
    return row


# Where `raybus up` (raybus-sim) keeps its stack: without --nats-url, tap joins it.
HOME = Path(".raybus")


def read_env(home: Path = HOME) -> dict[str, str]:
    env_file = home / "env"
    if not env_file.exists():
        return {}
    pairs = (line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    return {k: v for k, v in pairs}


def tap_auth(*, local_stack: bool) -> BusAuth:
    """The read-only `tap` user: RAYBUS_NATS_* from the environment, else (no --nats-url given)
    the credentials `raybus up` generated."""

    from raybus.bus import security
    from raybus.bus.permissions import Role

    given = CliSettings()
    if given.nats_user:
        return BusAuth(nats_user=given.nats_user, nats_password_file=given.nats_password_file,
                       nats_ca_file=given.nats_ca_file)
    secrets = HOME / "secrets"
    if local_stack and (secrets / "ca.pem").exists():
        env = security.service_env(secrets, Role.TAP, redis=False)
        return BusAuth(nats_user=env["RAYBUS_NATS_USER"], nats_password_file=env["RAYBUS_NATS_PASSWORD_FILE"],
                       nats_ca_file=env["RAYBUS_NATS_CA_FILE"])
    return BusAuth()


class BusUnreachable(RuntimeError):
    """NATS did not answer (or refused the tap user)."""


async def _connect(url: str, auth: BusAuth, closed_cb: Callable[[], Awaitable[None]]) -> Any:
    """A connection, or BusUnreachable after a few quick tries: a tap is run by hand, so it says
    what is wrong within seconds instead of retrying for minutes."""
    errors: list[BaseException] = []

    async def note(exc: Exception) -> None:  # nats-py logs each failure with a traceback otherwise
        errors.append(exc)

    try:
        return await connect_nats(url, auth, connect_timeout=2, max_reconnect_attempts=2,
                                  reconnect_time_wait=0.5, error_cb=note, closed_cb=closed_cb)
    except (nats.errors.Error, OSError, TimeoutError) as exc:
        cause = errors[-1] if errors else exc
        reason = str(cause).strip() or type(cause).__name__
        raise BusUnreachable(f"cannot reach NATS at {redact(url)}: {reason}") from None


async def run(args: argparse.Namespace, subject: str) -> int:
    url = args.nats_url or read_env().get("RAYBUS_NATS_URL", "nats://127.0.0.1:4222")
    seen = 0
    done = asyncio.Event()
    lost = asyncio.Event()

    async def on_closed() -> None:  # the connection is gone for good (reconnects exhausted)
        lost.set()
        done.set()

    try:
        nc = await _connect(url, tap_auth(local_stack=not args.nats_url), on_closed)
    except BusUnreachable as exc:
        print(f"raybus tap: {exc}", file=sys.stderr)
        return 1

    async def on_msg(msg: Any) -> None:
        nonlocal seen
        row = summarize(msg.subject, msg.data)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"{time.strftime('%H:%M:%S')} {row['subject']:<60} {row.get('kind', '-'):<12} "
                  f"{row.get('key', '-'):<32} {row.get('summary', '')}", flush=True)
        seen += 1
        if args.count and seen >= args.count:
            done.set()

    await nc.subscribe(subject, cb=on_msg)
    await nc.flush()  # the server has the subscription: nothing published from now on is missed
    print(f"tap: listening on {subject}", file=sys.stderr, flush=True)
    try:
        await asyncio.wait_for(done.wait(), args.timeout or None)
    except TimeoutError:
        pass
    if lost.is_set():
        print(f"raybus tap: lost NATS at {redact(url)} after {seen} messages", file=sys.stderr)
        return 1
    await nc.drain()
    if args.count and seen < args.count:
        print(f"tap: saw {seen} of {args.count} messages before the timeout", file=sys.stderr)
        return 1
    return 0
