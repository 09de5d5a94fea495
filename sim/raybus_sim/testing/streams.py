"""Read a JetStream stream's history in tests (a test helper, never used by services)."""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg
from nats.js.errors import NotFoundError


async def stream_messages(js: JetStreamContext, stream: str) -> list[RawStreamMsg]:
    """Every message still stored in `stream`, oldest first.

    An empty stream reports first_seq 0 (and the server answers 400 to a get of sequence 0), and a
    work-queue stream has holes where messages were acked away; both are skipped.
    """
    info = await js.stream_info(stream)
    out: list[RawStreamMsg] = []
    if info.state.messages == 0:
        return out
    for seq in range(max(1, info.state.first_seq), info.state.last_seq + 1):
        try:
            out.append(await js.get_msg(stream, seq))
        except NotFoundError:
            continue
    return out
