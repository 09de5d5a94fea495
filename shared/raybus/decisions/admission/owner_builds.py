"""What the RayJob and RayService controllers' decision code creates for one live owner, built by
the same functions (job/cluster.py, job/submitter.py; service/clusters.py, services.py,
incremental.py). The names those decisions invent (the RayJob's RayCluster and job id, the
RayService's pending RayCluster) must be the ones the live object's status names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from raybus.api.defaults import with_defaults
from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.api.rayservice import RayService
from raybus.decisions.admission.exempt import as_received
from raybus.decisions.admission.verdict import MALFORMED, NOT_BUILT, Refused, meta
from raybus.decisions.cluster import labels as k
from raybus.decisions.job.cluster import build_head_service_for_rayjob, construct_ray_cluster, dashboard_url
from raybus.decisions.job.submitter import SubmitterError, submitter_job, submitter_template
from raybus.decisions.rayservice import incremental as inc
from raybus.decisions.rayservice.clusters import construct_ray_cluster as construct_service_cluster
from raybus.decisions.rayservice.services import (
    ServiceBuildError,
    build_head_service,
    build_serve_service,
    head_service_name,
    serve_service_name,
)
from raybus.decisions.settings import DecisionSettings

Json = Mapping[str, Any]
# A live RayCluster the batch's owner owns, by name (retries when not seen yet; refuses a foreign one).
OwnedCluster = Callable[[str], Json]


def _model(cls: Any, raw: Json) -> Any:
    try:
        return cls.model_validate(dict(raw))
    except ValidationError:
        raise Refused(MALFORMED, f"the live {raw.get('kind')} does not parse") from None


def _status(raw: Json) -> Json:
    status = raw.get("status")
    return status if isinstance(status, Mapping) else {}


def _selected_cluster(created: Json) -> str:
    return str(((created.get("spec") or {}).get("selector") or {}).get(k.RAY_CLUSTER_LABEL_KEY) or "")


def _same(created: Json, built: Any, what: str) -> None:
    if created != as_received(built):
        raise Refused(NOT_BUILT, f"{what} differs from what its owner's spec builds")


def check_job_create(live: Json, created: Json, settings: DecisionSettings, owned_cluster: OwnedCluster,
                     *, what: str, any_cluster: OwnedCluster) -> None:
    """constructRayClusterForRayJob, BuildHeadServiceForRayJob, createNewK8sJob. `any_cluster`
    looks a RayCluster up whoever owns it (a clusterSelector's)."""
    job: RayJob = with_defaults(_model(RayJob, live))  # as reconcile_rayjob decides on it
    status = _status(live)
    cluster_name, job_id = str(status.get("rayClusterName") or ""), str(status.get("jobId") or "")
    kind, name = created.get("kind"), str(meta(created).get("name") or "")
    operator = settings.operator
    try:
        if kind == "RayCluster":
            if not cluster_name or name != cluster_name or job.spec.cluster_selector:
                raise Refused(NOT_BUILT, f"RayCluster {name} is not the one the RayJob's status names "
                              f"({cluster_name or 'none yet'})")
            _same(created, construct_ray_cluster(job, name=name, job_id=job_id,
                                                 dashboard_url=str(status.get("dashboardURL") or ""),
                                                 settings=operator), what)
        elif kind == "Service":
            cluster = _model(RayCluster, owned_cluster(_selected_cluster(created)))
            _same(created, build_head_service_for_rayjob(job, cluster, settings=operator), what)
        elif kind == "Job":
            if not cluster_name:
                raise Refused(NOT_BUILT, "a submitter Job before the RayJob's status names its RayCluster")
            selected = bool(job.spec.cluster_selector)
            cluster = _model(RayCluster, any_cluster(cluster_name) if selected else owned_cluster(cluster_name))
            url = str(status.get("dashboardURL") or "") or dashboard_url(cluster, settings=operator)
            template = submitter_template(job, job_id=job_id, dashboard_url=url, cluster_name=cluster.name,
                                          cluster_spec=cluster.spec, settings=operator)
            _same(created, submitter_job(job, template), what)
        else:
            raise Refused(NOT_BUILT, f"the RayJob controller builds no {kind}")
    except SubmitterError as exc:
        raise Refused(NOT_BUILT, f"{what}: the RayJob's spec builds none ({exc})") from None


def check_service_create(live: Json, created: Json, settings: DecisionSettings, owned_cluster: OwnedCluster,
                         *, what: str) -> None:
    """constructRayClusterForRayService, BuildHeadServiceForRayService, BuildServeService (also per
    cluster), createGateway, createHTTPRoute."""
    service: RayService = _model(RayService, live)
    status = dict(_status(live))
    kind, name = created.get("kind"), str(meta(created).get("name") or "")
    operator = settings.operator
    try:
        if kind == "RayCluster":
            named = {str((status.get(key) or {}).get("rayClusterName") or "")
                     for key in ("activeServiceStatus", "pendingServiceStatus")} - {""}
            if name not in named:
                raise Refused(NOT_BUILT, f"RayCluster {name} is not one the RayService's status names")
            _same(created, construct_service_cluster(service, name, status=status, gates=operator.feature_gates,
                                                     kuberay_version=operator.kuberay_version), what)
        elif kind == "Service":
            cluster = _model(RayCluster, owned_cluster(_selected_cluster(created)))
            if name == head_service_name(service):
                built = build_head_service(service, cluster, operator)
            elif name == serve_service_name(service):
                built = build_serve_service(service, cluster)
            else:
                built = build_serve_service(service, cluster, per_cluster=True)
            _same(created, built, what)
        elif kind == "Gateway":
            _same(created, inc.build_gateway(service), what)
        elif kind == "HTTPRoute":
            _same(created, http_route(service, created, owned_cluster), what)
        else:
            raise Refused(NOT_BUILT, f"the RayService controller builds no {kind}")
    except ServiceBuildError as exc:
        raise Refused(NOT_BUILT, f"{what}: the RayService's spec builds none ({exc})") from None


def http_route(service: RayService, created: Json, owned_cluster: OwnedCluster) -> Any:
    """The route rebuilt over the clusters it names (owned by the RayService) with the weights it
    carries (exempt: the traffic step is a function of time)."""
    rules = (created.get("spec") or {}).get("rules") or []
    backends = (rules[0].get("backendRefs") or []) if rules and isinstance(rules[0], Mapping) else []
    if not 1 <= len(backends) <= 2:
        raise Refused(NOT_BUILT, "an HTTPRoute with other than one or two backends")
    clusters, weights = [], []
    for ref in backends:
        backend = str(ref.get("name") or "")
        weight = ref.get("weight")
        if not backend.endswith("-serve-svc") or not isinstance(weight, int) or not 0 <= weight <= 100:
            raise Refused(NOT_BUILT, f"HTTPRoute backend {backend!r} weight {weight!r}")
        clusters.append(_model(RayCluster, owned_cluster(backend.removesuffix("-serve-svc"))))
        weights.append(weight)
    gateway = {"metadata": {"name": inc.gateway_name(service), "namespace": service.namespace}}
    step = inc.TrafficStep(weights[0], weights[1] if len(weights) > 1 else 0)
    return inc.build_http_route(service, gateway, clusters[0], clusters[1] if len(clusters) > 1 else None, step)
