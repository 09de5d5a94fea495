"""Submitter containers: the simulated kubelet runs them as the Ray Job CLI would.

A container whose command is a shell script using `ray job ...` (what KubeRay's
BuildJobSubmitCommand builds for K8sJobMode's submitter Job and SidecarMode's head container, or a
user's own `ray job submit` in submitterPodTemplate), or KubeRay's light-weight `/submitter`, gets
a program: the script runs (`shell.py`) against the simulated dashboards, in process:

- `ray job status --address A ID`: 0 if the head at A knows ID, else 1 (also when unreachable);
- `ray job submit --address A [--no-wait] [--submission-id ID] [...] -- ENTRYPOINT`: POST /api/jobs/
  (a duplicate id is the dashboard's 500: exit 1); without `--no-wait` it then follows the job;
- `ray job logs --address A --follow ID`: waits until the job ends;
- following ends when the head closes the log tail (`log_tail_close_lag_s` after the job's end),
  with Ray 2.60's exit codes: a waiting `ray job submit`
  exits 1 only when the job FAILED (cli.py `submit`: `if job_status == JobStatus.FAILED:
  sys.exit(1)`), so 0 for SUCCEEDED and STOPPED; `ray job logs --follow` and KubeRay v1.7's
  light-weight `/submitter` (rayjob-submitter.go: exits 1 only on an error) exit 0 for any end;
  all exit 1 when the job is not found or the head goes away (the stream breaks);
- `wget .../api/gcs_healthz` and KubeRay v1.7's `python -c "...urlopen('<url>/api/gcs_healthz'...)"`
  (the GCS health wait before submitting) succeed once the head's dashboard is up.

Addresses resolve like cluster DNS: `<service>.<ns>.svc...` -> the Service's `ray.io/cluster`
selector; `127.0.0.1`/`localhost` in a head Pod -> its own cluster. The container then terminates
with the script's exit code and the kubelet applies the pod's restartPolicy; the batch Job
controller counts the failed pod against backoffLimit. Requests are counted per head under
"submitter <METHOD> <endpoint>" (apart from the dashboard gateway's counters, which benchmarks read).
Containers that are not submitters keep running, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from subprocess import list2cmdline
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from raybus_sim.dashboard.handlers import submit_body
from raybus_sim.dashboard.jobs import TERMINAL
from raybus_sim.dashboard.registry import ClusterState, DashboardRegistry
from raybus_sim.kubelet import shell
from raybus_sim.kubelet.client import Obj

if TYPE_CHECKING:
    from raybus_sim.kubelet.kubelet import Kubelet
    from raybus_sim.kubelet.podstate import PodSim

log = logging.getLogger(__name__)
FOLLOW_INTERVAL_S = 0.1
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "0.0.0.0"})
SUBMIT_VALUE_OPTIONS = {"--runtime-env-json": "runtime_env", "--metadata-json": "metadata",
                        "--entrypoint-num-cpus": "entrypoint_num_cpus",
                        "--entrypoint-num-gpus": "entrypoint_num_gpus",
                        "--entrypoint-memory": "entrypoint_memory",
                        "--entrypoint-resources": "entrypoint_resources"}


@dataclass(frozen=True)
class Program:
    """What a container runs: a parsed shell script, or the light-weight submitter's argv."""

    script: list[shell.AndOr] | None
    argv: list[str]
    env: dict[str, str]


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("value") or "") for e in container.get("env") or []
            if isinstance(e, dict) and e.get("name")}


def program_of(container: Mapping[str, Any]) -> Program | None:
    """The submitter program of a container spec, or None (not a submitter: it just runs)."""
    argv = [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]
    if not argv:
        return None
    env = _env(container)
    exe = os.path.basename(argv[0])
    if exe == "submitter":
        return Program(script=None, argv=argv[1:], env=env)
    if exe in ("bash", "sh"):
        rest = argv[1:]
        while rest and rest[0].startswith("-") and "c" not in rest[0][1:]:
            rest = rest[1:]
        if not rest or not rest[0].startswith("-"):
            return None
        rest = rest[1:]
        if rest and rest[0] == "--":
            rest = rest[1:]
        source = rest[0] if rest else ""
    elif exe == "ray":
        source = " ".join(argv)  # exec form; quoting is lost, good enough for option parsing
    else:
        return None
    if "ray job" not in source:
        # Other `ray` commands (the autoscaler sidecar's `ray kuberay-autoscaler`, `ray start
        # --block`) are long-running processes: they just run.
        return None
    try:
        return Program(script=shell.parse(source, env), argv=[], env=env)
    except shell.ShellError as exc:
        log.warning("submitter script not understood; the container keeps running", extra={"error": str(exc)})
        return None


class ContainerPrograms:
    """Runs the programs of a kubelet's containers; one task per (namespace, pod, container)."""

    def __init__(self, kubelet: Kubelet) -> None:
        self._kubelet = kubelet
        self.dashboards: DashboardRegistry | None = None
        self._tasks: dict[tuple[str, str, str], asyncio.Task[None]] = {}

    def attach(self, registry: DashboardRegistry) -> None:
        """Run submitters against `registry` from now on, including those already running."""
        self.dashboards = registry
        for sim in list(self._kubelet.pods.values()):
            self.started(sim)

    def started(self, sim: PodSim) -> None:
        """Containers of `sim` that are running now: start the programs they have."""
        if self.dashboards is None:
            return
        pod = self._kubelet.current(sim)
        if pod is None:
            return
        specs = {c.get("name"): c for c in (pod.get("spec") or {}).get("containers") or []}
        for container in sim.containers:
            key = (sim.namespace, sim.name, container.name)
            if container.state != "running" or key in self._tasks:
                continue
            program = program_of(specs.get(container.name) or {})
            if program is None:
                continue
            task = asyncio.get_running_loop().create_task(self._run(sim, container.name, pod, program))
            self._tasks[key] = task

    def stop(self, namespace: str, pod: str) -> None:
        for key in [k for k in self._tasks if k[:2] == (namespace, pod)]:
            task = self._tasks.pop(key)
            if task is not asyncio.current_task():
                task.cancel()

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, sim: PodSim, container: str, pod: Obj, program: Program) -> None:
        assert self.dashboards is not None
        cli = RayJobCli(self.dashboards, self._kubelet, pod=pod, env=program.env)
        try:
            if program.script is not None:
                code = await shell.Runner(cli.run_simple).run(program.script)
            else:
                code = await cli.light_weight_submitter(program.argv)
        finally:
            self._tasks.pop((sim.namespace, sim.name, container), None)
        with contextlib.suppress(Exception):  # the pod may be gone or replaced meanwhile
            await self._kubelet.terminate_container(sim.namespace, sim.name, container, exit_code=code,
                                                    reason=None)


class RayJobCli:
    """The `ray job` CLI of one container, against the in-process simulated dashboards."""

    def __init__(self, registry: DashboardRegistry, kubelet: Kubelet, *, pod: Obj, env: dict[str, str]) -> None:
        self._registry = registry
        self._kubelet = kubelet
        self._pod = pod
        self._env = env

    # --- addressing ---------------------------------------------------------------------------------
    def _cluster_of(self, address: str) -> tuple[str, str] | None:
        url = urlparse(address if "://" in address else f"http://{address}")
        host = url.hostname or ""
        meta = self._pod.get("metadata") or {}
        ns, labels = str(meta.get("namespace") or "default"), meta.get("labels") or {}
        if host in LOCAL_HOSTS:
            # SidecarMode: the container shares the head Pod's network namespace.
            cluster = labels.get("ray.io/cluster") if labels.get("ray.io/node-type") == "head" else None
            return (ns, str(cluster)) if cluster else None
        parts = host.split(".")
        if len(parts) > 1 and parts[1] != "svc":
            ns = parts[1]
        service = self._kubelet.api.find("service", ns, parts[0])
        cluster = ((service or {}).get("spec") or {}).get("selector", {}).get("ray.io/cluster")
        return (ns, str(cluster)) if cluster else None

    def _head(self, address: str, endpoint: str) -> ClusterState | None:
        """The head at `address` if its dashboard answers (a request to it is counted)."""
        where = self._cluster_of(address)
        state = self._registry.get(*where) if where is not None else None
        if state is None:
            return None
        if not state.up:
            state.requests["submitter refused"] += 1
            return None
        state.requests[f"submitter {endpoint}"] += 1
        return state

    def _address(self, options: dict[str, str]) -> str:
        return options.get("--address") or self._env.get("RAY_ADDRESS") or "http://127.0.0.1:8265"

    # --- commands ------------------------------------------------------------------------------------
    async def run_simple(self, words: list[str]) -> int:
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]  # VAR=value prefixes
        if not words:
            return 0
        exe = os.path.basename(words[0])
        if exe == "ray" and len(words) > 2 and words[1] == "job":
            return await self._ray_job(words[2], words[3:])
        if exe in ("wget", "curl"):
            url = next((w for w in words[1:] if "://" in w), "")
            path = urlparse(url).path or "/"
            return 0 if self._head(url, f"GET {path}") is not None else 1
        if exe in ("python", "python3") and len(words) > 2 and words[1] == "-c":
            # KubeRay v1.7's GCS health wait: python -c "...urllib.request.urlopen('<url>', ...)...".
            found = _URLOPEN.search(words[2])
            if found is not None:
                url = found.group(1)
                return 0 if self._head(url, f"GET {urlparse(url).path or '/'}") is not None else 1
        if exe == "sleep" and len(words) > 1:
            with contextlib.suppress(ValueError):
                await asyncio.sleep(float(words[1]))
            return 0
        return 1 if exe == "false" else 0  # echo, grep (its input decided), the user's own tools

    async def _ray_job(self, sub: str, args: list[str]) -> int:
        options, flags, positional, entrypoint = _parse_options(args)
        address = self._address(options)
        if sub == "status":
            job_id = positional[0] if positional else ""
            state = self._head(address, "GET /api/jobs/{id}")
            return 0 if state is not None and state.jobs.find(job_id, self._registry.clock()) else 1
        if sub == "submit":
            return await self._submit(address, options, flags, entrypoint or list2cmdline(positional))
        if sub == "logs":
            job_id = positional[0] if positional else ""
            if "--follow" not in flags and "-f" not in flags:
                state = self._head(address, "GET /api/jobs/{id}/logs")
                return 0 if state is not None and state.jobs.find(job_id, self._registry.clock()) else 1
            return await self._follow(address, job_id, exit_1_on_failed=False)
        return 0  # stop, delete, list: not used by KubeRay's submitter

    async def _submit(self, address: str, options: dict[str, str], flags: set[str], entrypoint: str) -> int:
        state = self._head(address, "POST /api/jobs/")
        if state is None:
            return 1
        body: dict[str, Any] = {"entrypoint": entrypoint}
        if options.get("--submission-id"):
            body["submission_id"] = options["--submission-id"]
        for option, field in SUBMIT_VALUE_OPTIONS.items():
            if option not in options:
                continue
            value: Any = options[option]
            try:
                value = json.loads(value) if field in ("runtime_env", "metadata", "entrypoint_resources") \
                    else float(value)
            except ValueError:
                return 1  # the CLI rejects it before sending anything
            body[field] = value
        response = submit_body(state, body, now=self._registry.clock(), via="submitter")
        if response.status != 200:
            return 1  # e.g. 500 "job with submission_id ... already exists"
        job_id = json.loads(response.text or "{}").get("submission_id", "")
        if "--no-wait" in flags:
            return 0
        return await self._follow(address, job_id, exit_1_on_failed=True)

    async def _follow(self, address: str, job_id: str, *, exit_1_on_failed: bool) -> int:
        """`ray job logs --follow` (and a waiting `ray job submit`): tail until the job ends.
        `exit_1_on_failed`: the waiting `ray job submit`'s exit code (1 only for FAILED); the
        others exit 0 whatever the job's end."""
        first = self._head(address, "GET /api/jobs/{id}/logs/tail")
        if first is None:
            return 1
        session = first.session
        while True:
            where = self._cluster_of(address)
            state = self._registry.get(*where) if where is not None else None
            if state is None or not state.up or state.session != session:
                return 1  # the head went away: the log stream breaks
            job = state.jobs.find(job_id, self._registry.clock())
            if job is None:
                return 1
            now = self._registry.clock()
            status, end = job.status_at(now)
            # The CLI ends when the head closes the log tail: `log_tail_close_lag_s` after end_time
            # (what the gateway's stream does too, handlers.py; ~3 s on a real Ray 2.60 head).
            if status in TERMINAL and now >= (end if end is not None else now) + state.settings.log_tail_close_lag_s:
                return 1 if exit_1_on_failed and status == "FAILED" else 0
            await asyncio.sleep(FOLLOW_INTERVAL_S)

    async def light_weight_submitter(self, args: list[str]) -> int:
        """KubeRay's `/submitter` image: address and submission id from its env, then submit
        unless the id exists, and follow."""
        options, flags, positional, entrypoint = _parse_options(args)
        address = self._env.get("RAY_DASHBOARD_ADDRESS", "")
        job_id = self._env.get("RAY_JOB_SUBMISSION_ID", "")
        options = {**options, "--submission-id": job_id}
        state = self._head(address, "GET /api/jobs/{id}")
        if state is None:
            return 1
        if state.jobs.find(job_id, self._registry.clock()) is None:
            code = await self._submit(address, options, {*flags, "--no-wait"}, entrypoint or list2cmdline(positional))
            if code:
                return code
        return await self._follow(address, job_id, exit_1_on_failed=False)


_FLAGS = frozenset({"--no-wait", "--follow", "-f"})
_URLOPEN = re.compile(r"urlopen\(\s*['\"]([^'\"]+)['\"]")


def _parse_options(args: list[str]) -> tuple[dict[str, str], set[str], list[str], str]:
    """(--option values, flags, positional args, entrypoint after `--`), click's style:
    `--opt value` or `--opt=value`."""
    options: dict[str, str] = {}
    flags: set[str] = set()
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            # The Ray Job CLI quotes the entrypoint words back together (subprocess.list2cmdline).
            return options, flags, positional, list2cmdline(args[i + 1:])
        if arg.startswith("-") and "=" in arg:
            name, _, value = arg.partition("=")
            options[name] = value
        elif arg in _FLAGS:
            flags.add(arg)
        elif arg.startswith("-") and i + 1 < len(args):
            options[arg] = args[i + 1]
            i += 1
        else:
            positional.append(arg)
        i += 1
    return options, flags, positional, ""
