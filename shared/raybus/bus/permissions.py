"""Who may do what on the bus: one NATS user per role, with subject permissions derived from the
bus contract (subjects.py is the source of truth; README "Security model" has the table).

Why this matters: the command-executor applies whatever a batch on `raybus.cmd.>` says with
cluster-wide write RBAC, so "reconcilers hold no Kubernetes credentials" is only worth something
when nothing else can publish there. Each role gets the subjects its code publishes and the
JetStream API calls its consumers make, on its own streams only; nothing may create, update,
delete or purge a stream or bucket but `bus-admin`, because a stream's `republish`/`sources`
settings would let a low-privilege user route messages onto subjects it may not publish.

Pure data: the server config (bus/security.py) and the tests render it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from raybus.bus import subjects as s
from raybus.bus.subjects import Controller


class Role(StrEnum):
    WATCHER = "watcher"
    COMMAND_EXECUTOR = "command-executor"
    CLUSTER_RECONCILER = "cluster-reconciler"
    JOB_RECONCILER = "job-reconciler"
    SERVICE_RECONCILER = "service-reconciler"
    DASHBOARD_POLLER = "dashboard-poller"
    TAP = "tap"  # `raybus tap`: read-only
    BUS_ADMIN = "bus-admin"  # declares streams/buckets (install time, `raybus up`, tests)


# The Python package each service runs as (`python -m <module>`) -> its role.
SERVICE_ROLES: dict[str, Role] = {
    "watcher": Role.WATCHER, "command_executor": Role.COMMAND_EXECUTOR,
    "cluster_reconciler": Role.CLUSTER_RECONCILER, "job_reconciler": Role.JOB_RECONCILER,
    "service_reconciler": Role.SERVICE_RECONCILER, "dashboard_poller": Role.DASHBOARD_POLLER,
}

_RECONCILERS = {Role.CLUSTER_RECONCILER: Controller.CLUSTER, Role.JOB_RECONCILER: Controller.JOB,
                Role.SERVICE_RECONCILER: Controller.SERVICE}

INBOX = "_INBOX.>"  # replies to the requests a client makes (JetStream API, publish acks)


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny_publish: tuple[str, ...] = field(default=())


def _consume(stream: str) -> list[str]:
    """Create/bind/read consumers of one stream, pull from them and ack their messages."""
    return [f"$JS.API.CONSUMER.CREATE.{stream}", f"$JS.API.CONSUMER.CREATE.{stream}.>",
            f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.*", f"$JS.API.CONSUMER.INFO.{stream}.*",
            f"$JS.API.CONSUMER.DELETE.{stream}.*", f"$JS.API.CONSUMER.MSG.NEXT.{stream}.*",
            f"$JS.ACK.{stream}.>", f"$JS.FC.{stream}.>"]


def _get(stream: str) -> list[str]:
    """Read one message of a stream (the last value of a subject) by direct or API get."""
    return [f"$JS.API.DIRECT.GET.{stream}", f"$JS.API.DIRECT.GET.{stream}.>",
            f"$JS.API.STREAM.MSG.GET.{stream}"]


def _kv(bucket: str, *, write: bool) -> list[str]:
    stream = f"KV_{bucket}"
    read = [*_get(stream), *_consume(stream)]
    return read + ([f"$KV.{bucket}.>"] if write else [])


# Every service may ask for stream info (it waits for the streams `bus-admin` declares) and the
# account's JetStream info; neither changes anything.
_COMMON_PUBLISH = ["$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.NAMES"]


def _reconciler(controller: Controller) -> Permissions:
    publish = [
        s.commands_filter(controller), s.status_filter(controller),
        # A partition handover republishes the triggers only this replica knew of.
        s.triggers_filter(controller),
        s.dead_letter_subject(f"{controller.value}-reconciler"),
        *_consume(s.STREAM_OBJECTS), *_consume(s.STREAM_TRIGGERS), *_consume(s.STREAM_OUTCOMES),
        # ObjectCache.is_latest: is the copy a create was decided on still the object's last?
        *_get(s.STREAM_OBJECTS),
        *_kv(s.KV_LEASES, write=True),
        # Revoke (create-if-absent) batches it published and gave up on.
        *_kv(s.KV_BATCHES, write=True),
    ]
    if controller is not Controller.CLUSTER:  # RayJob/RayService talk to Ray through the poller
        publish += [s.dashboard_interest_filter(controller), s.dashboard_commands_filter(controller),
                    # its last published interest: publish only when it changed
                    *_get(s.STREAM_DASHBOARD_INTEREST),
                    *_consume(s.STREAM_DASHBOARD), *_consume(s.STREAM_DASHBOARD_RESULTS)]
    return Permissions(publish=tuple(_COMMON_PUBLISH + publish), subscribe=(INBOX,))


def permissions(role: Role) -> Permissions:
    if role is Role.BUS_ADMIN:
        return Permissions(publish=(">",), subscribe=(">",))
    if role is Role.TAP:
        # Plain subscriptions only: it never consumes, acks, publishes or reads the ledger.
        return Permissions(publish=(), subscribe=(s.everything_filter(),),
                           deny_publish=(">",))
    if role in _RECONCILERS:
        return _reconciler(_RECONCILERS[role])
    if role is Role.WATCHER:
        publish = [s.objects_filter(), s.triggers_filter(), s.dead_letter_subject("watcher"),
                   # what it published before a restart: it resumes instead of republishing all
                   *_consume(s.STREAM_OBJECTS),
                   # /metrics: every stream's consumers, read only (observability/busstate.py)
                   "$JS.API.CONSUMER.LIST.*"]
        return Permissions(publish=tuple(_COMMON_PUBLISH + publish), subscribe=(INBOX,))
    if role is Role.COMMAND_EXECUTOR:
        publish = [s.outcomes_filter(), s.triggers_filter(), s.dead_letter_subject("command-executor"),
                   *_consume(s.STREAM_COMMANDS), *_consume(s.STREAM_STATUS),
                   # admission: the live Ray objects' uids, from the snapshot (no API GET)
                   *_consume(s.STREAM_OBJECTS),
                   *_kv(s.KV_BATCHES, write=True)]
        return Permissions(publish=tuple(_COMMON_PUBLISH + publish), subscribe=(INBOX,))
    if role is Role.DASHBOARD_POLLER:
        publish = [s.dashboard_filter(), s.dashboard_results_filter(), s.triggers_filter(),
                   s.dead_letter_subject("dashboard-poller"),
                   *_consume(s.STREAM_DASHBOARD_INTEREST), *_consume(s.STREAM_DASHBOARD_COMMANDS),
                   *_consume(s.STREAM_DASHBOARD), *_consume(s.STREAM_OBJECTS),
                   *_kv(s.KV_LEASES, write=True), *_kv(s.KV_BATCHES, write=True)]
        return Permissions(publish=tuple(_COMMON_PUBLISH + publish), subscribe=(INBOX,))
    raise ValueError(f"unknown role {role}")
