"""Every raybus process's configuration: one pydantic-settings model per service, read one way.

A field is read from, in order: its flag (`--field-name`, generated from the model), its
environment variable (`RAYBUS_FIELD_NAME`, or the alias the field names), a file in
`SECRETS_DIR` named like that variable (a mounted Secret), and its default. The operator knobs
pure decisions read (KubeRay's own variable names, e.g. RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS, and
its --feature-gates / --batch-scheduler) are `KubeRayEnv` plus the two flags, turned into the one
`DecisionSettings` every reconciler and the command-executor load (`DecisionFlags.decisions`).
This is the only module of the product that reads the process environment.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

from pydantic import AliasChoices, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from raybus.bus.connect import BusAuth
from raybus.decisions.settings import DecisionSettings

ENV_PREFIX = "RAYBUS_"
T = TypeVar("T", bound="RaybusSettings")
# Where a Secret's keys are mounted as files, one per variable (e.g. raybus_ray_events_key).
SECRETS_DIR = "/etc/raybus/secrets"
GC_GEN0 = 50_000  # CommonSettings.gc_gen0's default (why: there)
# Field metadata: not a flag (set by code or tests only), and a value `raybus config` redacts.
NOT_A_FLAG: dict[str, Any] = {"flag": False}
SECRET: dict[str, Any] = {"secret": True}
REDACTED = "<redacted>"


class RaybusSettings(BaseSettings):
    """The base of every service's settings: RAYBUS_* variables, frozen, unknown ones ignored."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="ignore",
                                      populate_by_name=True, env_ignore_empty=True,
                                      secrets_dir=SECRETS_DIR if Path(SECRETS_DIR).is_dir() else None)

    service: str = Field(default="", json_schema_extra=NOT_A_FLAG)
    metrics_port: int = Field(default=0, description="port of /metrics, /healthz and /readyz (0: off)")
    # KubeRay's --metrics-addr names the address too. A Pod binds its own IP (deploy/kustomize).
    metrics_addr: str = Field(default="127.0.0.1",
                              description="host(s) the metrics and probe endpoint binds to, comma-separated")
    log_level: str = Field(default="INFO", description="DEBUG, INFO, WARNING or ERROR")
    replica_id: str = Field(default="", description="this replica's name (default: hostname and a random suffix)")
    # uvloop: libuv's loop, and its transports (TLS included) in C. Every bus message is a socket
    # write and a wake-up; on asyncio's own loop that plumbing was the largest item in every
    # service's profile. "asyncio" keeps the standard loop.
    event_loop: Literal["uvloop", "asyncio"] = Field(default="uvloop", description="uvloop or asyncio's own loop")
    # CPython's cyclic GC runs a young collection every 700 container allocations; one decoded Pod
    # is hundreds of dicts and lists, so at 1,000 clusters the collector took a fifth of the
    # command-executor's CPU. Our objects are freed by reference counting (JSON trees have no
    # cycles), so collect young objects 1 in gc_gen0 allocations. 0: CPython's defaults.
    gc_gen0: int = Field(default=GC_GEN0, description="allocations between young GC collections (0: CPython's 700)")

    def completed(self) -> Self:
        """Values derived from the others once loaded (e.g. the executor's DecisionSettings)."""
        return self


class CommonSettings(RaybusSettings):
    """What every service on the bus shares: NATS, its credentials (files a Secret mounts), the
    partitions and the streams."""

    nats_url: str = Field(default="nats://127.0.0.1:4222", description="NATS server(s), comma-separated")
    nats_user: str | None = Field(default=None, description="NATS user")
    nats_password_file: str | None = Field(default=None, description="file holding the NATS password")
    nats_ca_file: str | None = Field(default=None, description="CA bundle of the NATS servers' TLS")
    partitions: int = Field(default=16, description="partitions of the trigger subjects")
    # Declare streams and KV buckets at start (a dev bus). A secured bus has `bus-admin` declare
    # them once; services then only wait for them (their users may not change a stream).
    bus_declare: bool = Field(default=True, description="declare streams/buckets at start (false: wait for bus-admin's)")
    # A property of the NATS deployment, not of one service (3 on the 3-node JetStream cluster,
    # 1 in the dev overlay). JetStream refuses more replicas than it has servers.
    stream_replicas: int = Field(default=1, ge=1, description="NATS servers keeping each stream and KV bucket")

    @property
    def auth(self) -> BusAuth:
        return BusAuth(nats_user=self.nats_user, nats_password_file=self.nats_password_file,
                       nats_ca_file=self.nats_ca_file, redis_user=getattr(self, "redis_user", None),
                       redis_password_file=getattr(self, "redis_password_file", None),
                       redis_ca_file=getattr(self, "redis_ca_file", None))


class KubeSettings(CommonSettings):
    """A service that calls the Kubernetes API (KubeRay's --kube-api-qps / --kube-api-burst)."""

    kubeconfig: str | None = Field(default=None, description="kubeconfig file (default: in-cluster config)")
    kube_qps: float = Field(default=100.0, validation_alias=AliasChoices("kube_qps", "RAYBUS_KUBE_API_QPS"),
                            json_schema_extra={"flag": "--kube-api-qps"}, description="API requests per second")
    kube_burst: int = Field(default=200, validation_alias=AliasChoices("kube_burst", "RAYBUS_KUBE_API_BURST"),
                            json_schema_extra={"flag": "--kube-api-burst"}, description="API request burst")


class KubeRayEnv(BaseSettings):
    """KubeRay's own environment variables (read with os.Getenv in its controllers) and raybus's
    operator-wide ones, as raw strings: decisions/*/settings.py parse them with KubeRay's rules
    (only "false" disables, strconv.Atoi's fallback, ...)."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    ENABLE_PROBES_INJECTION: str | None = Field(default=None, description="'false': no probes injected")
    ENABLE_INIT_CONTAINER_INJECTION: str | None = Field(default=None, description="'false': no wait-gcs-ready init container")
    ENABLE_RAY_HEAD_CLUSTER_IP_SERVICE: str | None = Field(default=None, description="'true': a ClusterIP head Service, not headless")
    ENABLE_LOGIN_SHELL: str | None = Field(default=None, description="'true': /bin/bash -cl")
    ENABLE_RANDOM_POD_DELETE: str | None = Field(default=None, description="'true': scale-down picks random Pods")
    ENABLE_DETERMINISTIC_HEAD_POD_NAME: str | None = Field(default=None, description="'true': head Pod named <cluster>-head")
    ENABLE_GCS_FT_REDIS_CLEANUP: str | None = Field(default=None, description="'false': no Redis cleanup Job")
    USE_INGRESS_ON_OPENSHIFT: str | None = Field(default=None, description="'true': Ingress instead of Route")
    CLUSTER_DOMAIN: str | None = Field(default=None, description="cluster domain (default cluster.local)")
    RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV: str | None = Field(default=None, description="steady-state requeue (default 300)")
    RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS: str | None = Field(
        default=None, description="jobStatus terminal, submitter not finished: Complete/Failed after this long")
    RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS: str | None = Field(
        default=None, description="the dashboard unreadable this long: the RayJob Failed")
    DELETE_RAYJOB_CR_AFTER_JOB_FINISHES: str | None = Field(
        default=None, description="'true': shutdownAfterJobFinishes deletes the RayJob itself")
    ENABLE_ZERO_DOWNTIME: str | None = Field(default=None, description="'false': RayService upgrades without a new cluster")
    RAYBUS_DEFAULT_POD_ANNOTATIONS: str | None = Field(default=None, description="JSON object added to every Ray Pod's annotations")
    RAYBUS_DEFAULT_POD_LABELS: str | None = Field(default=None, description="JSON object added to every Ray Pod's labels")
    RAYBUS_RAY_EVENTS_URL: str | None = Field(default=None, description="the poller's Ray-event receiver as Pods reach it")
    RAYBUS_RAY_EVENTS_KEY: str | None = Field(default=None, description="key head Pods' event tokens derive from",
                                              json_schema_extra=SECRET)
    RAYBUS_RAY_EVENTS_REPORT_INTERVAL_MS: str | None = Field(default=None, description="Ray's event report interval")

    def mapping(self) -> dict[str, str]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class DecisionFlags(BaseSettings):
    """KubeRay's --feature-gates and --batch-scheduler (a mixin of the processes that decide or
    check decisions: their reading must agree, or admission refuses what a reconciler made)."""

    feature_gates: str = Field(default="", description="KubeRay --feature-gates syntax, e.g. RayMultiHostIndexing=false")
    batch_scheduler: str = Field(default="", description="KubeRay's --batch-scheduler: volcano, yunikorn or scheduler-plugins")

    def decisions(self, env: KubeRayEnv | None = None) -> DecisionSettings:
        """Raises ValueError on an unknown gate or batch scheduler, as KubeRay refuses to start."""
        return DecisionSettings.from_env((env or KubeRayEnv()).mapping(), feature_gates=self.feature_gates,
                                         batch_scheduler=self.batch_scheduler)


class ReconcilerSettings(DecisionFlags, CommonSettings):
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description="Redis (expectations, RayService state)")
    redis_user: str | None = Field(default=None, description="Redis user")
    redis_password_file: str | None = Field(default=None, description="file holding the Redis password")
    redis_ca_file: str | None = Field(default=None, description="CA bundle of Redis's TLS")
    debounce_s: float = Field(default=0.1, description="fold the events that follow a trigger within this delay")
    # None: the controller's default (the RayCluster controller 1 s, the others 0; workqueue.py).
    min_interval_s: float | None = Field(default=None, description="an object woken by events runs at most once "
                                         "per this many seconds (default: RayCluster 1, RayJob/RayService 0)")

    def completed(self) -> ReconcilerSettings:
        self.decisions()  # ValueError on an unknown gate or scheduler: KubeRay refuses to start
        return self


class CliSettings(BaseSettings):
    """What the `raybus` command's bus and install subcommands default to: the variables a
    service's Pod has (so they run the same inside one) and POD_NAMESPACE (the downward API)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="ignore", env_ignore_empty=True)
    namespace: str = Field(default="raybus-system", validation_alias=AliasChoices("POD_NAMESPACE"))
    kubeconfig: str | None = None
    nats_url: str = "nats://127.0.0.1:4222"
    nats_user: str | None = None
    nats_password_file: str | None = None
    nats_ca_file: str | None = None


def env_name(name: str, field: FieldInfo) -> str:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        named = [a for a in alias.choices if isinstance(a, str) and a.isupper()]
        if named:
            return named[0]
    return ENV_PREFIX + name.upper()


def flag_name(name: str, field: FieldInfo) -> str | None:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    flag = extra.get("flag", True)
    if flag is False:
        return None
    return flag if isinstance(flag, str) else "--" + name.replace("_", "-")


def is_secret(field: FieldInfo) -> bool:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return bool(extra.get("secret"))


def flags(cls: type[RaybusSettings]) -> list[tuple[str, str, FieldInfo]]:
    """(field, flag, info) of every field that is a flag, in the model's order."""
    out = []
    for name, field in cls.model_fields.items():
        flag = flag_name(name, field)
        if flag is not None:
            out.append((name, flag, field))
    return out


def parser(cls: type[RaybusSettings], service: str) -> argparse.ArgumentParser:
    """The service's flags, one per field; a flag not given leaves the field to env/file/default."""
    p = argparse.ArgumentParser(prog=service, argument_default=argparse.SUPPRESS)
    for name, flag, field in flags(cls):
        default = "(secret)" if is_secret(field) else repr(field.default)
        p.add_argument(flag, dest=name, metavar=name.upper(),
                       help=f"{field.description or ''} [env {env_name(name, field)}; default {default}]")
    return p


def load(cls: type[T], service: str, argv: Sequence[str] | None = None) -> T:
    """Flags, RAYBUS_* env and secret files -> settings; a bad value exits with one usage line."""
    p = parser(cls, service)
    given = vars(p.parse_args(argv))
    try:
        settings = cls(service=service, **given)
        if not settings.replica_id:
            settings = settings.model_copy(update={"replica_id": f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"})
        return settings.completed()
    except ValidationError as exc:  # one line for every bad value, no traceback
        p.error("; ".join(f"{_where(cls, e['loc'])}: {e['msg']}" for e in exc.errors()))
    except ValueError as exc:  # e.g. an unknown feature gate: KubeRay refuses to start
        p.error(str(exc))


def _where(cls: type[RaybusSettings], loc: tuple[int | str, ...]) -> str:
    name = str(loc[0]) if loc else ""
    field = cls.model_fields.get(name)
    if field is None:
        return name
    return f"{flag_name(name, field) or name} / {env_name(name, field)}"


def effective(settings: RaybusSettings) -> dict[str, Any]:
    """Every field's value, secrets redacted (`raybus config`)."""
    out: dict[str, Any] = {}
    for name, field in type(settings).model_fields.items():
        value = getattr(settings, name)
        if is_secret(field) and value:
            value = REDACTED
        elif hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
        out[name] = value
    return out


def kuberay_env_effective(env: KubeRayEnv | None = None) -> dict[str, str]:
    env = env or KubeRayEnv()
    return {k: (REDACTED if is_secret(KubeRayEnv.model_fields[k]) else v) for k, v in env.mapping().items()}


def process_environment() -> Mapping[str, str]:
    """The environment a process hands its children (the developer stack, the OpenTelemetry SDK's
    detectors): read here so this module stays the one that reads it."""
    return os.environ


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """Run a block under `env` as the process environment (the OpenTelemetry SDK's detectors read
    it; a test passes its own mapping)."""
    if env is os.environ:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
