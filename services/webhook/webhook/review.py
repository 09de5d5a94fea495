"""One AdmissionReview in, its response out (pure): controller-runtime's validating webhook
handler for KubeRay's RayCluster, RayJob and RayService validators."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from raybus.api.load import KINDS, parse_object
from raybus.api.settings import FeatureGates
from raybus.api.validation_webhook import Strictness, invalid_status, webhook_errors

Json = dict[str, Any]
# KubeRay's webhook paths (kubebuilder:webhook markers) -> the kind each validates.
PATHS = {
    "/validate-ray-io-v1-raycluster": "RayCluster",
    "/validate-ray-io-v1-rayjob": "RayJob",
    "/validate-ray-io-v1-rayservice": "RayService",
}


def _bad_request(message: str) -> Json:
    """admission.Errored(http.StatusBadRequest, err): refused, as a request it cannot judge."""
    return {"allowed": False, "status": {"status": "Failure", "code": 400, "reason": "BadRequest",
                                         "message": message}}


def respond(kind: str, request: Json, *, strictness: Strictness, gates: FeatureGates) -> Json:
    """The AdmissionResponse (without its uid) to an AdmissionRequest sent to `kind`'s path."""
    operation = request.get("operation")
    if operation in ("DELETE", "CONNECT"):
        return {"allowed": True}  # ValidateDelete returns nothing; the configuration asks for neither
    if operation not in ("CREATE", "UPDATE"):
        return _bad_request(f"unknown operation {json.dumps(operation)}")
    got = (request.get("kind") or {}).get("kind")
    if got != kind:
        return _bad_request(f"this webhook validates {kind}, not {got}")
    obj = request.get("object")
    if not isinstance(obj, dict) or kind not in KINDS:
        return _bad_request("the request has no object to validate")
    try:
        parsed = parse_object(obj)
    except (ValidationError, ValueError) as exc:
        return _bad_request(f"cannot decode the {kind}: {type(exc).__name__}")
    errors = webhook_errors(parsed, strictness=strictness, gates=gates)
    if not errors:
        return {"allowed": True}
    return {"allowed": False, "status": invalid_status(kind, parsed.metadata.name or "", errors)}


def review_response(uid: str, response: Json) -> Json:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, **response}}
