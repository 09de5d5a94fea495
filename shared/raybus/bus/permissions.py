"""Who may do what on the bus: one NATS user per role, with subject permissions derived from the
bus contract (subjects.py is the source of truth; docs "Security model" has the table).

Least privilege in full, because a leaked password must give no more than that service's own
decisions could produce:
- each role publishes only the subjects its code publishes;
- each role receives replies and deliveries only under its own inbox prefix (`_INBOX.<role>.>`,
  nats-py's `inbox_prefix`), so no one reads another role's pull deliveries or API replies;
- each role creates, binds, pulls and acks only the durable consumers it owns, by name (the
  reconcilers' trigger consumers live in one stream per controller), and deletes none; the read-only
  views are ephemeral ordered consumers, which it may create on the streams it reads;
- KV keys are writable only by the role they belong to: a reconciler's leases and revocations
  under its controller's prefix, the command ledger by the command-executor (`cmd.`) and the
  dashboard-poller (`dash.`) only (bus/ledger.py);
- nothing may create, update, delete or purge a stream or bucket but `bus-admin`, because a
  stream's `republish`/`sources` settings would route messages past these permissions.

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


def inbox_prefix(role: str) -> str:
    """Where a role's replies and push deliveries arrive (nats-py `inbox_prefix`)."""
    return f"_INBOX.{role}"


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny_publish: tuple[str, ...] = field(default=())


def _follow(stream: str) -> list[str]:
    """Read a stream through ephemeral ordered consumers (flow control replies included, and their
    info: how far the snapshot reaches)."""
    return [f"$JS.API.CONSUMER.CREATE.{stream}", f"$JS.FC.{stream}.>", f"$JS.API.CONSUMER.INFO.{stream}.*"]


def _durable(stream: str, name: str) -> list[str]:
    """Create (idempotently), bind, pull from and ack one named durable consumer; never delete one."""
    return [f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{name}", f"$JS.API.CONSUMER.INFO.{stream}.{name}",
            f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}", f"$JS.ACK.{stream}.{name}.>"]


def _get(stream: str) -> list[str]:
    """Read one message of a stream (the last value of a subject) by direct or API get."""
    return [f"$JS.API.DIRECT.GET.{stream}", f"$JS.API.DIRECT.GET.{stream}.>",
            f"$JS.API.STREAM.MSG.GET.{stream}"]


def _kv_read(bucket: str) -> list[str]:
    return _get(f"KV_{bucket}")


def _kv_write(bucket: str, keys: str) -> list[str]:
    """Write (put, create, compare-and-set, delete marker) the keys matching `keys` of a bucket."""
    return [f"$KV.{bucket}.{keys}"]


# Every service may ask for stream info (it waits for the streams `bus-admin` declares) and the
# account's JetStream info; neither changes anything.
_COMMON_PUBLISH = ["$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.NAMES"]


def _service(role: Role, publish: list[str]) -> Permissions:
    return Permissions(publish=tuple(_COMMON_PUBLISH + publish), subscribe=(f"{inbox_prefix(role.value)}.>",))


def _reconciler(role: Role, controller: Controller) -> Permissions:
    c = controller.value
    publish = [
        s.commands_filter(controller), s.status_filter(controller),
        # A partition handover republishes the triggers only this replica knew of.
        s.triggers_filter(controller),
        s.dead_letter_subject(f"{c}-reconciler"),
        *_follow(s.STREAM_OBJECTS), *_follow(s.STREAM_OUTCOMES),
        # ObjectCache.is_latest: is the copy a create was decided on still the object's last?
        *_get(s.STREAM_OBJECTS),
        # Its partitions' trigger consumers, in its own controller's trigger stream.
        f"$JS.API.CONSUMER.DURABLE.CREATE.{s.trigger_stream(controller)}.*",
        f"$JS.API.CONSUMER.INFO.{s.trigger_stream(controller)}.*",
        f"$JS.API.CONSUMER.MSG.NEXT.{s.trigger_stream(controller)}.*",
        f"$JS.ACK.{s.trigger_stream(controller)}.>",
        *_kv_read(s.KV_LEASES), *_kv_write(s.KV_LEASES, f"{c}.>"),
        # The command ledger: read the appliers' records; revoke only under its own prefix.
        *_kv_read(s.KV_BATCHES), *_kv_read(s.KV_REVOCATIONS), *_kv_write(s.KV_REVOCATIONS, f"{c}.>"),
    ]
    if controller is not Controller.CLUSTER:  # RayJob/RayService talk to Ray through the poller
        publish += [s.dashboard_interest_filter(controller), s.dashboard_commands_filter(controller),
                    # its last published interest: publish only when it changed
                    *_get(s.STREAM_DASHBOARD_INTEREST),
                    *_follow(s.STREAM_DASHBOARD), *_follow(s.STREAM_DASHBOARD_RESULTS)]
    return _service(role, publish)


def _executor() -> Permissions:
    return _service(Role.COMMAND_EXECUTOR, [
        s.outcomes_filter(), s.triggers_filter(), s.dead_letter_subject("command-executor"),
        *_durable(s.STREAM_COMMANDS, s.COMMAND_CONSUMER), *_durable(s.STREAM_STATUS, s.STATUS_CONSUMER),
        *_kv_read(s.KV_BATCHES), *_kv_write(s.KV_BATCHES, "cmd.>"),
        *_kv_read(s.KV_REVOCATIONS), *_kv_write(s.KV_REVOCATIONS, "*.cmd.>")])


def _poller() -> Permissions:
    return _service(Role.DASHBOARD_POLLER, [
        s.dashboard_filter(), s.dashboard_results_filter(),
        s.triggers_filter(Controller.JOB), s.triggers_filter(Controller.SERVICE),
        s.dead_letter_subject("dashboard-poller"),
        *_follow(s.STREAM_DASHBOARD_INTEREST), *_follow(s.STREAM_DASHBOARD), *_follow(s.STREAM_OBJECTS),
        *_durable(s.STREAM_DASHBOARD_COMMANDS, s.DASHBOARD_COMMAND_CONSUMER),
        *_kv_read(s.KV_LEASES), *_kv_write(s.KV_LEASES, "dashboard-poller.>"),
        *_kv_read(s.KV_BATCHES), *_kv_write(s.KV_BATCHES, "dash.>"),
        *_kv_read(s.KV_REVOCATIONS), *_kv_write(s.KV_REVOCATIONS, "*.dash.>")])


def permissions(role: Role) -> Permissions:
    if role is Role.BUS_ADMIN:
        return Permissions(publish=(">",), subscribe=(">",))
    if role is Role.TAP:
        # Plain subscriptions only: it never consumes, acks, publishes or reads the ledger.
        return Permissions(publish=(), subscribe=(s.everything_filter(),), deny_publish=(">",))
    if role in _RECONCILERS:
        return _reconciler(role, _RECONCILERS[role])
    if role is Role.WATCHER:
        # what it published before a restart: it resumes instead of republishing all; and (its
        # /metrics) every stream's consumers, read only (observability/busstate.py)
        return _service(role, [s.objects_filter(), s.triggers_filter(), s.dead_letter_subject("watcher"),
                               *_follow(s.STREAM_OBJECTS), "$JS.API.CONSUMER.LIST.*"])
    if role is Role.COMMAND_EXECUTOR:
        return _executor()
    if role is Role.DASHBOARD_POLLER:
        return _poller()
    raise ValueError(f"unknown role {role}")
