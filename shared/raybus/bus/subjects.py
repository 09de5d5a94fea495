"""Every NATS subject raybus uses is built here, and only here (docs/architecture.md has the table).

Tokens never contain dots: Kubernetes names may (pods, services), so `.` and `%` are
percent-encoded. The object's real namespace/name always travel in the envelope too.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

PREFIX = "raybus"
DEFAULT_PARTITIONS = 16


class Controller(StrEnum):
    """Consumers of triggers; one per reconciler service."""

    CLUSTER = "cluster"
    JOB = "job"
    SERVICE = "service"


class Kind(StrEnum):
    """Object kinds the watcher publishes (tokens, lower-case)."""

    RAYCLUSTER = "raycluster"
    RAYJOB = "rayjob"
    RAYSERVICE = "rayservice"
    POD = "pod"
    SERVICE = "service"
    JOB = "job"
    ENDPOINTSLICE = "endpointslice"
    INGRESS = "ingress"
    SERVICEACCOUNT = "serviceaccount"
    ROLE = "role"
    ROLEBINDING = "rolebinding"
    NETWORKPOLICY = "networkpolicy"
    PODGROUP = "podgroup"  # the --batch-scheduler's gang PodGroup (volcano or scheduler-plugins)
    # gateway.networking.k8s.io/v1: the RayService's incremental upgrade (owned objects only).
    GATEWAY = "gateway"
    HTTPROUTE = "httproute"


def token(value: str) -> str:
    """Percent-encode what may not appear inside a subject token."""
    if not value:
        return "_"
    return value.replace("%", "%25").replace(".", "%2E").replace(" ", "%20").replace(
        "*", "%2A").replace(">", "%3E")


def untoken(value: str) -> str:
    if value == "_":
        return ""
    return (value.replace("%3E", ">").replace("%2A", "*").replace("%20", " ")
            .replace("%2E", ".").replace("%25", "%"))


def partition_of(namespace: str, name: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    """Stable across processes and restarts (Python's hash() is salted per process)."""
    digest = hashlib.blake2b(f"{namespace}/{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions


def partition_token(index: int) -> str:
    return f"p{index:02d}"


# --- objects: last value per subject = the current state of every watched object ----------------
# The scope token says which kind of Ray resource an object belongs to (`scope_of` in the watcher:
# the `ray.io/originated-from-crd` label KubeRay puts on the RayClusters a RayJob/RayService
# creates and on every Pod), so the RayJob/RayService reconcilers can follow only their own Pods
# and clusters instead of decoding every Pod event of every RayCluster.
NO_SCOPE = "_"
SCOPES = ("raycluster", "rayjob", "rayservice")


def object_subject(kind: Kind | str, namespace: str, name: str, scope: str = NO_SCOPE) -> str:
    return f"{PREFIX}.obj.{Kind(kind).value}.{scope or NO_SCOPE}.{token(namespace)}.{token(name)}"


def objects_filter(kind: Kind | str | None = None, scope: str | None = None) -> str:
    if kind is None:
        return f"{PREFIX}.obj.>"
    if scope is None:
        return f"{PREFIX}.obj.{Kind(kind).value}.>"
    return f"{PREFIX}.obj.{Kind(kind).value}.{scope}.>"


# --- triggers: "look again at this object", partitioned per controller --------------------------
def trigger_subject(controller: Controller | str, *, namespace: str, name: str,
                    partitions: int = DEFAULT_PARTITIONS) -> str:
    part = partition_token(partition_of(namespace, name, partitions))
    return f"{PREFIX}.trigger.{Controller(controller).value}.{part}.{token(namespace)}.{token(name)}"


def triggers_filter(controller: Controller | str | None = None) -> str:
    if controller is None:
        return f"{PREFIX}.trigger.>"
    return f"{PREFIX}.trigger.{Controller(controller).value}.>"


def trigger_partition_filter(controller: Controller | str, partition: int) -> str:
    return f"{PREFIX}.trigger.{Controller(controller).value}.{partition_token(partition)}.>"


# --- commands: what reconcilers ask the command executor to do ----------------------------------
def command_subject(controller: Controller | str, namespace: str, name: str) -> str:
    return f"{PREFIX}.cmd.{Controller(controller).value}.{token(namespace)}.{token(name)}"


def commands_filter(controller: Controller | str | None = None) -> str:
    if controller is None:
        return f"{PREFIX}.cmd.>"
    return f"{PREFIX}.cmd.{Controller(controller).value}.>"


# --- status writes: last value per object, so queued older statuses are replaced -------------------
def status_subject(controller: Controller | str, namespace: str, name: str) -> str:
    return f"{PREFIX}.status.{Controller(controller).value}.{token(namespace)}.{token(name)}"


def status_filter(controller: Controller | str | None = None) -> str:
    if controller is None:
        return f"{PREFIX}.status.>"
    return f"{PREFIX}.status.{Controller(controller).value}.>"


def status_batch_id(reconcile_id: str) -> str:
    """Id of the status half of a reconcile (its Outcome and Nats-Msg-Id differ from the rest)."""
    return f"{reconcile_id}-status"


# --- outcomes: what the executor did (last value per object) ------------------------------------
def outcome_subject(controller: Controller | str, namespace: str, name: str, *,
                    status: bool = False) -> str:
    """A status write's Outcome has its own subject: on the command batches' one, the Outcome of
    the batch after it replaced it (last value per subject) before a consumer re-created after a
    NATS node's loss read it, and that status stayed held back as in flight."""
    base = f"{PREFIX}.outcome.{Controller(controller).value}.{token(namespace)}.{token(name)}"
    return f"{base}.{STATUS_OUTCOME_TOKEN}" if status else base


STATUS_OUTCOME_TOKEN = "status"


def outcomes_filter(controller: Controller | str | None = None) -> str:
    if controller is None:
        return f"{PREFIX}.outcome.>"
    return f"{PREFIX}.outcome.{Controller(controller).value}.>"


# --- dashboard observations (dashboard-poller publishes only changes) ---------------------------
def dashboard_subject(namespace: str, cluster: str) -> str:
    return f"{PREFIX}.dash.{token(namespace)}.{token(cluster)}"


def dashboard_filter() -> str:
    return f"{PREFIX}.dash.>"


def dashboard_interest_subject(controller: Controller | str, namespace: str, name: str) -> str:
    """What one owner (RayJob/RayService) needs the dashboard-poller to observe (last value)."""
    return f"{PREFIX}.dashwant.{Controller(controller).value}.{token(namespace)}.{token(name)}"


def dashboard_interest_filter(controller: Controller | str | None = None) -> str:
    if controller is None:
        return f"{PREFIX}.dashwant.>"
    return f"{PREFIX}.dashwant.{Controller(controller).value}.>"


def dashboard_command_subject(controller: Controller | str, namespace: str, name: str) -> str:
    """Dashboard writes (submit/stop/delete job, PUT/DELETE Serve) for one owner."""
    return f"{PREFIX}.dashcmd.{Controller(controller).value}.{token(namespace)}.{token(name)}"


def dashboard_commands_filter(controller: Controller | str | None = None) -> str:
    if controller is None:
        return f"{PREFIX}.dashcmd.>"
    return f"{PREFIX}.dashcmd.{Controller(controller).value}.>"


def dashboard_result_subject(controller: Controller | str, namespace: str, name: str) -> str:
    return f"{PREFIX}.dashresult.{Controller(controller).value}.{token(namespace)}.{token(name)}"


def dashboard_results_filter(controller: Controller | str | None = None) -> str:
    if controller is None:
        return f"{PREFIX}.dashresult.>"
    return f"{PREFIX}.dashresult.{Controller(controller).value}.>"


# --- dead letters: undecodable messages, per consuming service ----------------------------------
def dead_letter_subject(service: str) -> str:
    return f"{PREFIX}.dlq.{token(service)}"


def everything_filter() -> str:
    """Every raybus subject (read-only `raybus tap`)."""
    return f"{PREFIX}.>"


def dead_letter_filter() -> str:
    return f"{PREFIX}.dlq.>"


# --- JetStream names (stream, consumer, KV bucket names may not contain dots either) ------------
STREAM_OBJECTS = "RAYBUS_OBJECTS"
# One trigger stream per controller: NATS permissions are per subject, so a reconciler may pull
# only its own controller's consumers when their stream is its own (bus/permissions.py).
STREAM_TRIGGERS_PREFIX = "RAYBUS_TRIGGERS"
STREAM_COMMANDS = "RAYBUS_COMMANDS"
STREAM_STATUS = "RAYBUS_STATUS"
STREAM_OUTCOMES = "RAYBUS_OUTCOMES"
STREAM_DASHBOARD = "RAYBUS_DASHBOARD"
STREAM_DASHBOARD_INTEREST = "RAYBUS_DASHBOARD_INTEREST"
STREAM_DASHBOARD_COMMANDS = "RAYBUS_DASHBOARD_COMMANDS"
STREAM_DASHBOARD_RESULTS = "RAYBUS_DASHBOARD_RESULTS"
STREAM_DEAD_LETTERS = "RAYBUS_DLQ"
KV_LEASES = "raybus-leases"
KV_BATCHES = "raybus-batches"  # the command ledger (bus/ledger.py): written by the appliers only
KV_REVOCATIONS = "raybus-revocations"  # who came first per batch: its reconciler's revoke or a claim


# Durable consumers of the appliers (one each, shared by their replicas).
COMMAND_CONSUMER = "command-executor"
STATUS_CONSUMER = "command-executor-status"
DASHBOARD_COMMAND_CONSUMER = "dashboard-poller"


def trigger_stream(controller: Controller | str) -> str:
    return f"{STREAM_TRIGGERS_PREFIX}_{Controller(controller).value.upper()}"


def trigger_consumer_name(controller: Controller | str, partition: int) -> str:
    return f"{Controller(controller).value}-reconciler-{partition_token(partition)}"


# Lease keys start with their owner's name: NATS lets each role write only its own (permissions.py).
def lease_key(controller: Controller | str, partition: int) -> str:
    return f"{Controller(controller).value}.lease.{partition_token(partition)}"


def member_key(controller: Controller | str, replica_id: str) -> str:
    return f"{Controller(controller).value}.member.{token(replica_id)}"


def member_prefix(controller: Controller | str) -> str:
    return f"{Controller(controller).value}.member."


POLLER_LEASE_KEY = "dashboard-poller.lease"
