"""Requests of the README's section 9-cr-validation (RayCluster/RayJob against deploy/crds)."""

from __future__ import annotations

import asyncio
import copy
import json
import re
from typing import Any

from .kube_http import Answer, Api, Json, case

S9 = "9-cr-validation"
IMAGE = "rayproject/ray:2.9.0"


def rc_spec() -> Json:
    """Key order as the real run sent it: its 400 message quotes the request body."""
    return {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
        {"name": "ray-head", "image": IMAGE}]}}},
        "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 5,
                              "rayStartParams": {}, "template": {"spec": {"containers": [
                                  {"name": "ray-worker", "image": IMAGE}]}}}]}


def rc(name: str, **spec: Any) -> Json:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
            "spec": {**rc_spec(), **spec}}


def _cr_case(title: str, body: Json, query: dict[str, str] | None = None, resource: str = "rayclusters") -> None:
    async def run(api: Api) -> Answer:
        return (await api.create(resource, body, query=query)).answer()
    case(S9, title)(run)


def _with(name: str, edit: Any) -> Json:
    body = rc(name)
    edit(body)
    return body


_cr_case("replicas: 'abc'", _with("cr-badtype", lambda b: b["spec"]["workerGroupSpecs"][0].update(replicas="abc")))
_cr_case("replicas: -1 / minReplicas > maxReplicas (schema has no min?)", _with(
    "cr-neg", lambda b: b["spec"]["workerGroupSpecs"][0].update(replicas=-1, minReplicas=6, maxReplicas=5)))
_UNKNOWN = _with("cr-unknown", lambda b: (b.update(topLevel=1), b["metadata"].update(bogusMeta=1),
                                          b["spec"].update(foo=1), b["spec"]["workerGroupSpecs"][0].update(bogus=1)))
_cr_case("unknown fields (default fieldValidation)", _UNKNOWN)
_cr_case("unknown fields fieldValidation=Strict", _with("cr-strict", lambda b: b["spec"].update(foo=1)),
         {"fieldValidation": "Strict"})
_cr_case("unknown field in embedded pod template (container)", _with(
    "cr-embedded", lambda b: b["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].update(bogus=1)))
_cr_case("missing required headGroupSpec", _with("cr-noreq", lambda b: b["spec"].pop("headGroupSpec")))
_cr_case("missing required groupName", _with("cr-nogn", lambda b: b["spec"]["workerGroupSpecs"][0].pop("groupName")))
_cr_case("missing container name in template (embedded PodSpec required)", _with(
    "cr-noname", lambda b: b["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].pop("name")))
_cr_case("CR resource quantity as int (x-int-or-string)", _with(
    "cr-qty", lambda b: b["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0].update(
        resources={"limits": {"cpu": 1, "memory": "1x"}})))
_cr_case("CR invalid name uppercase", rc("Bad-RC"))
_cr_case("CR status on create dropped", {**rc("cr-status"), "status": {"state": "ready"}})
_cr_case("CR null for non-nullable field", rc("cr-null", rayVersion=None))
_cr_case("CR create with kind mismatch", {**rc("cr-kind"), "kind": "RayJob"})
_cr_case("CEL: managedBy invalid value on create", rc("cel1", managedBy="example.com/other"))


@case(S9, "CR missing apiVersion/kind")
async def _no_kind(api: Api) -> Answer:
    body = {"metadata": {"name": "cr-nokind"}, "spec": rc_spec()}
    return (await api.req("POST", "/apis/ray.io/v1/namespaces/apidiff/rayclusters",
                          raw=json.dumps(body).encode())).answer()


@case(S9, "CEL: managedBy changed on update (immutable)")
async def _managed_by_immutable(api: Api) -> Answer:
    await api.ok("rayclusters", rc("cel2", managedBy="ray.io/kuberay-operator"))
    return (await api.patch("rayclusters", "cel2", {"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}})).answer()


@case(S9, "CEL: RayJob deletionStrategy with onSuccess only")
async def _deletion_strategy(api: Api) -> Answer:
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "cel3"}, "spec": {
        "entrypoint": "python -c 'print(1)'", "shutdownAfterJobFinishes": True, "rayClusterSpec": rc_spec(),
        "deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"}}}}
    return (await api.create("rayjobs", job)).answer()


# --- kubectl get: the CRD's additionalPrinterColumns through the Table API, as kubectl prints them --------
GEN_STATUS = {"desiredWorkerReplicas": 2, "availableWorkerReplicas": 1, "desiredCPU": "2", "desiredMemory": "4G",
              "desiredGPU": "0", "desiredTPU": "0", "state": "ready",
              "head": {"podIP": "10.244.0.7", "serviceIP": "10.96.0.42"}}


async def kubectl_get(api: Api, *args: str) -> Answer:
    await api.ok("rayclusters", rc("gen"))
    r = await api.patch("rayclusters", "gen", {"status": copy.deepcopy(GEN_STATUS)}, sub="status")
    assert r.code == 200, r.text
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(api.kubeconfig), "-n", "apidiff", "get", "rayclusters", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    lines = [re.split(r"\s{2,}", line.strip()) for line in out.decode().splitlines() if line.strip()]
    return {"rc": proc.returncode, "err": err.decode(), "header": lines[0] if lines else [],
            "gen_row": lines[1] if len(lines) > 1 else []}


@case(S9, "kubectl get rayclusters -o wide (header)")
async def _kubectl_wide(api: Api) -> Answer:
    return await kubectl_get(api, "-o", "wide")


@case(S9, "kubectl get rayclusters (default columns)")
async def _kubectl_default(api: Api) -> Answer:
    return await kubectl_get(api)
