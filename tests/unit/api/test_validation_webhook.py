"""KubeRay's validating webhooks as pure code (raybus.api.validation_webhook) and the webhook
service's AdmissionReview handling (services/webhook/webhook/review.py): what each refuses, in
KubeRay's words, and the Status the API server relays."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.api import parse_object
from raybus.api.settings import FeatureGates
from raybus.api.validation_webhook import FieldError, Strictness, invalid_status, webhook_errors
from tests.unit.api.builders import Doc, mutated, raycluster, rayjob, rayservice, worker
from webhook.review import PATHS, respond, review_response

GATES = FeatureGates()


def errors(doc: Doc, strictness: Strictness = Strictness.KUBERAY) -> list[str]:
    return [str(e) for e in webhook_errors(parse_object(doc), strictness=strictness, gates=GATES)]


def _rename(doc: Doc, name: str) -> Doc:
    return mutated(doc, lambda d: d["metadata"].update(name=name))


def _duplicate_group(d: Doc) -> None:
    d["spec"]["workerGroupSpecs"].append(dict(worker(d["spec"]), replicas=2))


def _min_above_max(d: Doc) -> None:
    worker(d["spec"]).update(minReplicas=5, maxReplicas=1)


def test_valid_objects_pass_both_ways() -> None:
    for doc in (raycluster(), rayjob(), rayservice()):
        assert errors(doc) == errors(doc, Strictness.FULL) == []


def test_raycluster_duplicate_worker_group_names() -> None:
    doc = mutated(raycluster(), _duplicate_group)
    assert errors(doc) == ['spec.workerGroupSpecs[1]: Invalid value: "small": worker group names must be unique']


def test_only_the_first_duplicate_as_kuberays_validateWorkerGroups() -> None:
    doc = mutated(raycluster(), lambda d: (_duplicate_group(d), _duplicate_group(d)))
    assert len(errors(doc)) == 1


@pytest.mark.parametrize(("make", "kind", "message"), [
    (raycluster, "RayCluster", "RayCluster name should be no more than 53 characters"),
    (rayjob, "RayJob", "The RayJob metadata is invalid: RayJob name should be no more than 47 characters"),
    (rayservice, "RayService", ("The RayService metadata is invalid: RayService name should be no more than "
                               "47 characters")),
])
def test_names_too_long(make: Any, kind: str, message: str) -> None:
    name = "a" * 64
    assert errors(_rename(make(), name)) == [f'metadata.name: Invalid value: "{name}": {message}']


def test_name_not_a_dns1035_label() -> None:
    (error,) = errors(_rename(raycluster(), "1abc"))
    assert error.startswith('metadata.name: Invalid value: "1abc": RayCluster name should be a valid DNS1035 label: '
                            "[a DNS-1035 label must consist of lower case alphanumeric characters")


def test_operator_checks_only_in_full_strictness() -> None:
    """KubeRay's webhook lets minReplicas > maxReplicas through (the operator's Warning Event says
    it); raybus's full strictness refuses it with the operator's message."""
    doc = mutated(raycluster(), _min_above_max)
    assert errors(doc) == []
    assert errors(doc, Strictness.FULL) == [
        "spec: Forbidden: worker group small has minReplicas 5 greater than maxReplicas 1"]
    job = mutated(rayjob(), lambda d: worker(d["spec"]["rayClusterSpec"]).update(minReplicas=5, maxReplicas=1))
    assert errors(job) == []
    assert errors(job, Strictness.FULL) == [("spec: Forbidden: The RayJob spec is invalid: worker group small has "
                                            "minReplicas 5 greater than maxReplicas 1")]


def test_full_strictness_rayjob_and_rayservice() -> None:
    job = mutated(rayjob(), lambda d: d["spec"].update(suspend=True, shutdownAfterJobFinishes=False))
    assert errors(job) == []
    assert errors(job, Strictness.FULL) == [
        ("spec: Forbidden: The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not "
        "allowed to be suspended")]
    service = mutated(rayservice(), lambda d: d["spec"].update(rayClusterDeletionDelaySeconds=-1))
    assert errors(service) == []
    assert errors(service, Strictness.FULL)


def test_raycronjob_has_no_webhook() -> None:
    cron = {"apiVersion": "ray.io/v1", "kind": "RayCronJob", "metadata": {"name": "x" * 80},
            "spec": {"schedule": "* * * * *", "jobTemplate": rayjob()["spec"]}}
    assert errors(cron, Strictness.FULL) == []


def test_invalid_status_is_apierrors_new_invalid() -> None:
    one = [FieldError("metadata.name", "FieldValueInvalid", 'Invalid value: "x": bad')]
    status = invalid_status("RayCluster", "x", one)
    assert status["message"] == 'RayCluster.ray.io "x" is invalid: metadata.name: Invalid value: "x": bad'
    assert (status["code"], status["reason"], status["status"]) == (422, "Invalid", "Failure")
    assert status["details"] == {"group": "ray.io", "kind": "RayCluster", "name": "x", "causes": [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "x": bad', "field": "metadata.name"}]}
    two = one + [FieldError("spec", "FieldValueForbidden", "Forbidden: no")]
    assert invalid_status("RayCluster", "x", two)["message"] == (
        'RayCluster.ray.io "x" is invalid: [metadata.name: Invalid value: "x": bad, spec: Forbidden: no]')


def _request(doc: Doc, operation: str = "CREATE", kind: str | None = None) -> Doc:
    return {"uid": "u-1", "operation": operation, "kind": {"group": "ray.io", "version": "v1",
                                                            "kind": kind or doc["kind"]},
            "name": doc["metadata"]["name"], "namespace": "ns", "object": doc}


def test_review_allows_denies_and_names_the_paths_as_kuberay() -> None:
    assert PATHS == {"/validate-ray-io-v1-raycluster": "RayCluster", "/validate-ray-io-v1-rayjob": "RayJob",
                     "/validate-ray-io-v1-rayservice": "RayService"}
    kw: dict[str, Any] = {"strictness": Strictness.KUBERAY, "gates": GATES}
    assert respond("RayCluster", _request(raycluster()), **kw) == {"allowed": True}
    denied = respond("RayCluster", _request(mutated(raycluster(), _duplicate_group), "UPDATE"), **kw)
    assert denied["allowed"] is False and denied["status"]["code"] == 422
    assert denied["status"]["message"].startswith('RayCluster.ray.io "demo" is invalid: spec.workerGroupSpecs[1]')
    assert respond("RayCluster", _request(raycluster(), "DELETE"), **kw) == {"allowed": True}
    wrong_kind = respond("RayCluster", _request(rayjob()), **kw)
    assert wrong_kind["allowed"] is False and wrong_kind["status"]["code"] == 400
    undecodable = respond("RayCluster", _request(mutated(raycluster(), lambda d: d["spec"].update(
        workerGroupSpecs="x"))), **kw)
    assert undecodable["allowed"] is False and undecodable["status"]["code"] == 400
    assert review_response("u-1", {"allowed": True}) == {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "u-1", "allowed": True}}
