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
from pathlib import Path
from typing import Any

from raybus.bus import subjects as s
from raybus.bus.connect import BusAuth, connect_nats
from raybus.runtime.settings import CliSettings

SHORTHANDS = {"obj", "trigger", "cmd", "status", "outcome", "dash", "dlq"}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("tap", help="print bus traffic as it happens")
    p.add_argument("filter", nargs="*", help="subject pattern or shorthand (obj pod, cmd, ...)")
    p.add_argument("--nats-url", default=None, help="default: from .raybus/env or 127.0.0.1:4222")
    p.add_argument("--count", type=int, default=0, help="stop after N messages")
    p.add_argument("--timeout", type=float, default=0.0, help="stop after S seconds")
    p.add_argument("--json", action="store_true", help="print one JSON object per message")
    p.set_defaults(func=lambda a: asyncio.run(run(a)))


def subject_filter(words: list[str]) -> str:
    if not words:
        return f"{s.PREFIX}.>"
    if len(words) == 1 and (words[0].startswith(f"{s.PREFIX}.") or words[0] == ">"):
        return words[0]
    if words[0] in SHORTHANDS:
        return ".".join([s.PREFIX, *words, ">"])
    raise SystemExit(f"unknown filter {words!r}: use a subject pattern or one of {sorted(SHORTHANDS)}")


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


async def run(args: argparse.Namespace) -> int:
    url = args.nats_url or read_env().get("RAYBUS_NATS_URL", "nats://127.0.0.1:4222")
    nc = await connect_nats(url, tap_auth(local_stack=not args.nats_url))
    seen = 0
    done = asyncio.Event()

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

    await nc.subscribe(subject_filter(args.filter), cb=on_msg)
    await nc.flush()  # the server has the subscription: nothing published from now on is missed
    print(f"tap: listening on {subject_filter(args.filter)}", file=sys.stderr, flush=True)
    try:
        await asyncio.wait_for(done.wait(), args.timeout or None)
    except TimeoutError:
        pass
    await nc.drain()
    if args.count and seen < args.count:
        print(f"tap: saw {seen} of {args.count} messages before the timeout", file=sys.stderr)
        return 1
    return 0
