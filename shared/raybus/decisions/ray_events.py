"""Job ends pushed by Ray: the events a Ray 2.49+ head exports over HTTP, and what raybus sets so
that its heads export them to the dashboard-poller (pure: no I/O, env or clock).

What a Ray 2.60 head does (read in ray/dashboard/modules/aggregator/ and verified on a real head):
the GCS records RayEvents when `RAY_enable_ray_event=true`, flushes them to the head's dashboard
agent every `RAY_ray_events_report_interval_ms` (1000 ms by default), and the agent's aggregator
POSTs them, as a JSON list of protobuf-JSON RayEvent objects (camelCase), to
`RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR` (the URL is used as given, path included),
at most every 0.1 s, keeping only `RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES`; a POST
that fails is retried forever with backoff (0.01 s doubling to 5 s). No header carries anything
raybus could check, so the per-cluster secret is in the URL's path.

Which event says "a submitted job ended": not the driver-job events. DRIVER_JOB_DEFINITION_EVENT
carries the submission id (`config.metadata.job_submission_id`) but its FINISHED lifecycle event
names only the driver's job id, exists only for entrypoints that start a Ray driver (`sleep 5`
has none), and was pushed 0.3-1.1 s *before* the Jobs API showed the job terminal. The job's
supervisor actor (`_ray_internal_job_actor_<submission id>`, Ray's job_supervisor.py) writes the
terminal status and then calls `exit_actor()`, so its ACTOR_LIFECYCLE_EVENT DEAD (whose
`deathCause.actorDiedErrorContext.name` carries the actor's name) means the status is readable:
that is the signal used, for every entrypoint and for stopped jobs too.

What a token holder can do: the token sits in the head Pod's env, so anyone who can read that Pod
spec may post as that cluster. The receiver bounds what that costs (a body limit checked before the
body is read, a per-cluster rate, a cap on what it remembers per cluster) and the token is bound to
the RayCluster's uid, so it dies with that incarnation (a RayCluster re-created under the same name
gets a new one). The head's aggregator is told to send at most `SEND_BATCH_SIZE` events a POST, so
its batches stay well under the body limit (an actor lifecycle event of Ray 2.60 is 1-2 KB).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Iterator

from pydantic import BaseModel, ConfigDict, Field

EXPORT_ADDR_ENV = "RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR"
EXPOSABLE_TYPES_ENV = "RAY_DASHBOARD_AGGREGATOR_AGENT_EXPOSABLE_EVENT_TYPES"
ENABLE_ENV = "RAY_enable_ray_event"
REPORT_INTERVAL_ENV = "RAY_ray_events_report_interval_ms"
SEND_BATCH_SIZE_ENV = "RAY_DASHBOARD_AGGREGATOR_AGENT_MAX_EVENT_SEND_BATCH_SIZE"  # Ray's default 1000
SEND_BATCH_SIZE = 50
MAX_BODY_BYTES = 1024 * 1024  # the receiver's limit (413 beyond), 50 events of 20 KB
# Only actor lifecycle events: the one type the signal needs (Ray's default list also exposes
# task, node and worker events, far more traffic for nothing raybus reads).
EXPOSABLE_TYPES = "ACTOR_LIFECYCLE_EVENT"
PATH_PREFIX = "/v1/ray-events"
JOB_SUPERVISOR_PREFIX = "_ray_internal_job_actor_"  # ray.dashboard.modules.job.common
SERVE_NAMESPACE = "serve"  # ray.serve._private.constants: controller, proxies and replicas live here


class RaySettingsError(ValueError):
    pass


class ExportSettings(BaseModel):
    """Where raybus-built head Pods push their events. Off when `url` or `key` is empty."""

    model_config = ConfigDict(frozen=True)

    url: str = ""  # the poller's receiver as the Pods reach it, e.g. http://raybus-dashboard-poller:8266
    key: str = Field(default="", repr=False)  # HMAC key the per-cluster tokens derive from
    report_interval_ms: int = 100  # the GCS flush period (Ray's default 1000 ms adds up to 1 s)

    @property
    def enabled(self) -> bool:
        return bool(self.url and self.key)


def cluster_token(key: str, namespace: str, cluster: str, uid: str) -> str:
    """The per-cluster secret: HMAC-SHA256(key, "<namespace>/<cluster>/<uid>"). A head knows only its
    own token, so it cannot report jobs under another cluster's path, nor under a later RayCluster
    of the same name; the poller recomputes it from the live RayCluster's uid, so no token is
    stored anywhere. The builder and the executor's admission both have the live object's uid."""
    return hmac.new(key.encode(), f"{namespace}/{cluster}/{uid}".encode(), hashlib.sha256).hexdigest()[:40]


def token_ok(key: str, namespace: str, cluster: str, uid: str | None, token: str) -> bool:
    """`uid`: the live RayCluster's (None: no such cluster, nothing is accepted)."""
    return bool(key) and bool(uid) and hmac.compare_digest(cluster_token(key, namespace, cluster, uid or ""), token)


def export_path(namespace: str, cluster: str, token: str) -> str:
    return f"{PATH_PREFIX}/{namespace}/{cluster}/{token}"


def export_env(settings: ExportSettings, *, namespace: str, cluster: str, uid: str) -> list[dict[str, str]]:
    """The env a head's Ray container needs to push its events to the poller ([] when off, or for
    a RayCluster without a uid: no token could be checked for it)."""
    if not settings.enabled or not uid:
        return []
    url = settings.url.rstrip("/") + export_path(namespace, cluster,
                                                 cluster_token(settings.key, namespace, cluster, uid))
    return [{"name": ENABLE_ENV, "value": "true"},
            {"name": REPORT_INTERVAL_ENV, "value": str(settings.report_interval_ms)},
            {"name": EXPOSABLE_TYPES_ENV, "value": EXPOSABLE_TYPES},
            {"name": SEND_BATCH_SIZE_ENV, "value": str(SEND_BATCH_SIZE)},
            {"name": EXPORT_ADDR_ENV, "value": url}]


# --- the pushed events (the parts raybus reads; everything else is ignored) ---------------------
class _In(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ActorDiedContext(_In):
    name: str = ""
    ray_namespace: str = Field(default="", alias="rayNamespace")


class DeathCause(_In):
    actor_died: ActorDiedContext | None = Field(default=None, alias="actorDiedErrorContext")


class ActorTransition(_In):
    state: str = ""
    death_cause: DeathCause | None = Field(default=None, alias="deathCause")


class ActorLifecycle(_In):
    actor_id: str = Field(default="", alias="actorId")
    transitions: list[ActorTransition] = Field(default_factory=list, alias="stateTransitions")


class RayEvent(_In):
    event_type: str = Field(default="", alias="eventType")
    actor_lifecycle: ActorLifecycle | None = Field(default=None, alias="actorLifecycleEvent")


class RayEventBatch(BaseModel):
    """One POST body: a JSON list of RayEvents."""

    events: list[RayEvent]


def _actor_deaths(events: Iterable[RayEvent]) -> Iterator[ActorDiedContext]:
    """The death context of every actor that turned DEAD in these events."""
    for event in events:
        life = event.actor_lifecycle
        if event.event_type != "ACTOR_LIFECYCLE_EVENT" or life is None:
            continue
        for transition in life.transitions:
            died = transition.death_cause.actor_died if transition.death_cause else None
            if transition.state == "DEAD" and died is not None:
                yield died


def ended_submissions(events: Iterable[RayEvent]) -> set[str]:
    """Submission ids whose job supervisor actor died in these events (their job is terminal)."""
    return {died.name[len(JOB_SUPERVISOR_PREFIX):] for died in _actor_deaths(events)
            if died.name.startswith(JOB_SUPERVISOR_PREFIX)}


def serve_actor_deaths(events: Iterable[RayEvent]) -> int:
    """Deaths of Serve's own actors (controller, proxy, replicas: Ray namespace "serve") in these
    events. Serve does not export app statuses, but an app turns UNHEALTHY or vanishes through such
    a death (a replica crashing or failing its health checks is killed and replaced; `serve
    shutdown` or a dead controller ends them all), so each one is a cheap "read Serve now" signal
    (deploys and scale-downs cause some too: a read more while the cadence is fast anyway)."""
    return sum(1 for died in _actor_deaths(events) if died.ray_namespace == SERVE_NAMESPACE)
