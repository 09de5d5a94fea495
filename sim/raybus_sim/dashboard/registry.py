"""Per-cluster state of the simulated Ray dashboards, keyed by (namespace, cluster name).

The small API other simulator parts use (e.g. the simulated kubelet)::

    registry = DashboardRegistry()
    registry.head_up("default", "raycluster-a")    # head pod became Ready: dashboard answers
    registry.head_down("default", "raycluster-a")  # head pod gone/not Ready: connections refused
    registry.is_up("default", "raycluster-a")

`head_up` on a cluster whose head was down starts a *fresh* head: jobs and Serve apps are lost, as
with a real head restart without GCS fault tolerance (KubeRay then resubmits/redeploys). Pass
`keep_state=True` to model GCS FT. Request counters survive restarts so benchmarks can count how
many requests raybus sent to each head. Everything else (faults, plans, settings) is driven by the
control API in `control.py` or directly through `ClusterState`.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from raybus_sim.dashboard.imports import DEFAULT_IMPORTABLE_MODULES
from raybus_sim.dashboard.jobs import JobPlan, JobTable
from raybus_sim.dashboard.journal import Journal
from raybus_sim.dashboard.serve import ServeState

FAULT_KINDS = ("timeout", "invalid_json", "html_502", "html_200", "reset")


@dataclass(kw_only=True)
class ClusterSettings:
    """Timings of one simulated head. Defaults follow README §3/§4 (print(1): RUNNING at 0.59 s,
    SUCCEEDED at 0.69 s; stop -> STOPPED in ~1.1 s; apps RUNNING in 3-7 s)."""

    job_pending_s: float = 0.6
    job_running_s: float = 0.1
    stop_delay_s: float = 1.0
    ghost_window_s: float = 2.5  # DELETE this soon after the end -> ghost (39b); 5 s was clean (70-74)
    ghost_delay_s: float = 1.2  # supervisor dies this long after the DELETE (README §3)
    serve_deploy_s: float = 3.0
    serve_unchanged_blip_s: float = 0.1  # README §4 "right after every PUT" (captures: 0.02-0.09 s)
    serve_delete_s: float = 0.5  # a removed app that was serving: DELETING this long (v6: 0.15-2.3 s)
    serve_delete_unserved_s: float = 0.1  # removed while never serving (failed/first deploy): gone fast
    proxy_starting_s: float = 0.1  # proxy STARTING right after Serve starts (serve_transition_trace_main)
    timeout_sleep_s: float = 3.0  # default sleep of a "timeout" fault: past KubeRay's 2 s client timeout
    # Write latencies measured on a real Ray 2.60 head (README §8). A client with one 2 s timeout
    # reports the first PUT and a DELETE with running apps as failures although both succeed.
    serve_first_put_s: float = 4.0  # the first PUT starts the Serve controller and proxy: 3.4-9 s
    serve_put_s: float = 0.03  # later PUTs: 13-40 ms
    serve_delete_running_s: float = 2.5  # DELETE /api/serve/applications/ while apps run: 2.4-3 s
    serve_delete_idle_s: float = 0.8  # ... when only failed apps exist
    job_write_s: float = 0.0  # POST /api/jobs/, stop, DELETE
    # GET /api/jobs/<id>/logs/tail (WebSocket): real Ray's JobManager.tail_job_logs looks for new
    # log lines / a terminal status every LOG_TAIL_SLEEP_S = 1 s, so the stream closes up to 1 s
    # after the job ends.
    log_tail_interval_s: float = 1.0
    # ... and closes it only this long after the job's end_time: on a real Ray 2.60 head on
    # loopback the close came 2.9-3.9 s after end_time (the supervisor writes end_time, the agent's
    # tail sees the terminal status on its next 1 s look, reads to EOF once more after another 1 s,
    # and the head relays the close; tests/integration/realray measure it). A client that waits for
    # the close to learn a job's end learns it this late.
    log_tail_close_lag_s: float = 3.0
    # Pushed events (events.py; only while the head Pod carries an export address): the job
    # supervisor's death reaches the receiver this long after the job's end_time.
    events_push_lag_s: float = 0.3
    # Top-level modules a head can import (imports.py); anything else ends DEPLOY_FAILED with
    # ModuleNotFoundError. ["*"]: everything imports.
    importable_modules: list[str] = field(default_factory=lambda: sorted(DEFAULT_IMPORTABLE_MODULES))

    def importable(self) -> frozenset[str]:
        return frozenset(self.importable_modules)

    def update(self, values: dict[str, Any]) -> None:
        names = {f.name for f in fields(self)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        for key, value in values.items():
            if key == "importable_modules":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError("importable_modules is a list of module names")
                self.importable_modules = list(value)
            else:
                setattr(self, key, float(value))


@dataclass(kw_only=True)
class Fault:
    """Misbehave for the next `count` dashboard requests whose path contains `path_contains`."""

    kind: str
    count: int
    sleep_s: float | None = None
    path_contains: str = ""


@dataclass(kw_only=True)
class ClusterState:
    namespace: str
    name: str
    up: bool = False
    session: str = ""
    jobs: JobTable = field(default_factory=JobTable)
    serve: ServeState = field(default_factory=lambda: ServeState(session=""))
    settings: ClusterSettings = field(default_factory=ClusterSettings)
    faults: list[Fault] = field(default_factory=list)
    job_plans: dict[str, dict[str, Any]] = field(default_factory=dict)  # plans for future submission ids
    # What a script file does when an entrypoint runs it (path -> plan), shared by the namespace's
    # clusters as a mounted ConfigMap is: a real head reads the file, the simulated one is told.
    script_plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    events_export_addr: str = ""  # RAY_DASHBOARD_AGGREGATOR_AGENT_EVENTS_EXPORT_ADDR of the head Pod
    journal: Journal = field(default_factory=Journal)  # the registry's (journal.py)

    def record(self, kind: str, **fields: Any) -> None:
        self.journal.write(namespace=self.namespace, cluster=self.name, session=self.session, kind=kind, **fields)

    def restart(self, now: float) -> None:
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d_%H-%M-%S_%f")
        self.session = f"session_{stamp}_5973"
        self.jobs = JobTable()
        self.serve = ServeState(session=self.session)

    def take_fault(self, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.count > 0 and fault.path_contains in path:
                fault.count -= 1
                if fault.count == 0:
                    self.faults.remove(fault)
                return fault
        return None

    def apply_job_plan(self, plan: JobPlan, values: dict[str, Any]) -> None:
        for key in ("pending_s", "running_s", "exit_code"):
            if key in values:
                setattr(plan, key, values[key])
        if "outcome" in values:
            plan.exit_code = 0 if values["outcome"] == "SUCCEEDED" else int(values.get("exit_code") or 1)


class DashboardRegistry:
    """Holds every simulated head. `clock` (epoch seconds) is injectable for deterministic tests."""

    def __init__(
        self, *, clock: Callable[[], float] = time.time, defaults: ClusterSettings | None = None,
        journal: Journal | None = None,
    ) -> None:
        self.clock = clock
        self.journal = journal if journal is not None else Journal.from_env()
        self.defaults = defaults or ClusterSettings()
        self._clusters: dict[tuple[str, str], ClusterState] = {}
        self.script_plans: dict[str, dict[str, dict[str, Any]]] = {}  # namespace -> path -> plan

    def cluster(self, namespace: str, name: str) -> ClusterState:
        """The state of (namespace, name), created (head down) if unknown."""
        key = (namespace, name)
        state = self._clusters.get(key)
        if state is None:
            settings = copy.deepcopy(self.defaults)
            state = ClusterState(namespace=namespace, name=name, settings=settings, journal=self.journal,
                                 script_plans=self.script_plans.setdefault(namespace, {}))
            state.restart(self.clock())
            self._clusters[key] = state
        return state

    def get(self, namespace: str, name: str) -> ClusterState | None:
        return self._clusters.get((namespace, name))

    def head_up(self, namespace: str, name: str, *, keep_state: bool = False) -> None:
        """The head pod is Ready: its dashboard, agent and (once Serve runs) proxy answer."""
        state = self.cluster(namespace, name)
        if not state.up and not keep_state:
            state.restart(self.clock())
            state.record("head_up")
        state.up = True

    def head_down(self, namespace: str, name: str) -> None:
        """The head pod is gone or not Ready: every request to it is refused."""
        self.cluster(namespace, name).up = False

    def is_up(self, namespace: str, name: str) -> bool:
        state = self._clusters.get((namespace, name))
        return state is not None and state.up

    def forget(self, namespace: str, name: str) -> None:
        """Drop a cluster entirely (RayCluster deleted)."""
        self._clusters.pop((namespace, name), None)

    def clusters(self) -> list[ClusterState]:
        return list(self._clusters.values())
