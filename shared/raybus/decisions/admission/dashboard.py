"""Dashboard-poller admission: may it send this command to a Ray head?

The poller runs `POST /api/jobs/` (any entrypoint: code execution on the head) and
`PUT /api/serve/applications/` for whoever publishes on `raybus.dashcmd.>`. So a command is executed
only if the RayJob or RayService reconciler's decision code could have produced it from what the
API server holds (the poller's own informers, never the bus):

- its owner (the RayJob/RayService) exists with the message's uid, in the message's namespace;
- the target RayCluster is one the owner owns (or, for a RayJob with a clusterSelector, the
  cluster it selects);
- a submission is exactly the live RayJob's: the job id and cluster its status names, and the
  entrypoint, runtime env, metadata and entrypoint resources of its spec (job/running.py builds
  both); a stop or delete names the live RayJob's job id;
- a Serve config is exactly the live RayService's serveConfigV2 (plus the target_capacity an
  incremental upgrade sends, 0..100).
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from raybus.api.defaults import with_defaults
from raybus.api.rayjob import RayJob
from raybus.api.rayservice import RayService
from raybus.decisions.admission import verdict as v
from raybus.decisions.dashboard_contract import (
    DashboardCommand,
    DeleteJob,
    DeleteServeApps,
    PutServeConfig,
    StopJob,
    SubmitJob,
)
from raybus.decisions.job import constants as job_c
from raybus.decisions.job.running import submit_job_request
from raybus.decisions.rayservice.serve import parse_serve_config

Json = Mapping[str, Any]
OWNERS = {"job": "RayJob", "service": "RayService"}
# What a command may carry but is never sent to Ray, so never compared: the reason (logs).
_NOT_SENT = {"reason"}


def _status(raw: Json) -> Json:
    status = raw.get("status")
    return status if isinstance(status, Mapping) else {}


def _check_cluster(owner_kind: str, owner: Json, cluster: str, view: v.LiveView) -> None:
    namespace = str(v.meta(owner).get("namespace") or "")
    if owner_kind == "RayJob":
        selector = ((owner.get("spec") or {}).get("clusterSelector") or {})
        if selector.get(job_c.RAY_JOB_CLUSTER_SELECTOR_KEY) == cluster:
            return  # the cluster the user selected: not owned, but the RayJob's to use
    live = view.get("RayCluster", namespace, cluster)
    if live is None:
        raise v.Refused(v.OBJECT_NOT_LIVE, f"RayCluster {namespace}/{cluster} not seen", retry=True)
    if not v.owned_by(live, owner_kind, str(v.meta(owner).get("name") or ""), v.uid_of(owner)):
        raise v.Refused(v.FOREIGN_TARGET, f"RayCluster {namespace}/{cluster} is not "
                        f"{owner_kind} {namespace}/{v.meta(owner).get('name')}'s")


def _sent(command: DashboardCommand) -> dict[str, Any]:
    return command.model_dump(exclude=_NOT_SENT)


def _check_job_command(owner: Json, command: DashboardCommand) -> None:
    status = _status(owner)
    job_id, cluster = str(status.get("jobId") or ""), str(status.get("rayClusterName") or "")
    if isinstance(command, SubmitJob):
        try:
            job = with_defaults(RayJob.model_validate(dict(owner)))
            expected = submit_job_request(job, job_id=job_id, cluster=cluster)
        except (ValidationError, ValueError):
            raise v.Refused(v.MALFORMED, "the live RayJob does not parse") from None
        if _sent(command) != _sent(expected):
            raise v.Refused(v.NOT_BUILT, "the submission is not the live RayJob's (job id, cluster, entrypoint, "
                            "runtime env, metadata or entrypoint resources differ)")
    elif isinstance(command, StopJob | DeleteJob):
        if not job_id or command.job_id != job_id:
            raise v.Refused(v.NOT_BUILT, f"{command.op} of Ray job {command.job_id!r}, not the RayJob's "
                            f"({job_id or 'none'})")
    else:
        raise v.Refused(v.KIND, f"the RayJob controller never sends {command.op}")


def _check_service_command(owner: Json, command: DashboardCommand) -> None:
    if isinstance(command, DeleteServeApps):
        return
    if not isinstance(command, PutServeConfig):
        raise v.Refused(v.KIND, f"the RayService controller never sends {command.op}")
    try:
        service = RayService.model_validate(dict(owner))
    except ValidationError:
        raise v.Refused(v.MALFORMED, "the live RayService does not parse") from None
    config = dict(command.config)
    capacity = config.pop("target_capacity", None)
    if capacity is not None and not (isinstance(capacity, int) and 0 <= capacity <= 100):
        raise v.Refused(v.NOT_BUILT, f"target_capacity {capacity!r} is not 0..100")
    if config != parse_serve_config(service.spec.serve_config_v2 or ""):
        raise v.Refused(v.NOT_BUILT, "the Serve config is not the live RayService's serveConfigV2")


def admit_dashboard_command(*, controller: str, namespace: str, name: str, uid: str | None,
                            command: DashboardCommand, view: v.LiveView,
                            resource_version: str | None = None) -> v.Verdict:
    """The verdict on one DashboardCommandMessage (its key = the owner)."""
    kind = OWNERS.get(controller)
    if kind is None:
        return v.Verdict(admitted=False, reason=v.UNKNOWN_CONTROLLER,
                         detail=f"controller {controller!r} sends no dashboard commands")
    owner = view.get(kind, namespace, name)
    if owner is None or (uid and v.uid_of(owner) != uid):
        if uid and view.gone(uid):
            return v.Verdict(admitted=False, reason=v.OBJECT_DELETED,
                             detail=f"{v.where(kind, namespace, name)} uid {uid} was deleted")
        return v.Verdict(admitted=False, reason=v.OBJECT_NOT_LIVE, retry=True,
                         detail=f"{v.where(kind, namespace, name)} not seen")
    try:
        _check_cluster(kind, owner, command.cluster, view)
        if controller == "job":
            _check_job_command(owner, command)
        else:
            _check_service_command(owner, command)
    except v.Refused as refused:
        if refused.verdict.reason == v.NOT_BUILT and \
                v.older(str(v.meta(owner).get("resourceVersion") or ""), resource_version):
            return v.Verdict(admitted=False, reason=v.NOT_BUILT, detail=refused.verdict.detail, retry=True)
        return refused.verdict
    return v.ADMIT
