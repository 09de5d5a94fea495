"""metav1.Status errors shaped like kube-apiserver's (k8s.io/apimachinery/pkg/api/errors)."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """Raised anywhere in the server; the HTTP layer turns it into a Status response."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        # Field order of metav1.Status as Go serializes it (clients that show the raw body see it).
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # StatusReasonUnknown ("") is omitted
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _qualified(resource: str, group: str) -> str:
    # errors.go prints GroupResource.String(): "pods" for core, "rayclusters.ray.io" otherwise.
    return f"{resource}.{group}" if group else resource


def _details(resource: str, group: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name} if name else {}  # StatusDetails fields are omitempty
    if group:
        details["group"] = group
    details["kind"] = resource
    return details


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(resource, group)} "{name}" not found',
                    _details(resource, group, name))


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{_qualified(resource, group)} "{name}" already exists',
                    _details(resource, group, name))


def conflict(resource: str, group: str, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
                    _details(resource, group, name))


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str, str]], *,
            qualified: str | None = None) -> ApiError:
    """causes: (reason, field, message) e.g. ("FieldValueRequired", "spec.containers", "Required value").

    `qualified` replaces the printed `Kind.group` (the generic registry prints the resource, e.g.
    `rayclusters.ray.io`, for its own metadata errors)."""
    qkind = qualified or (f"{kind}.{group}" if group else kind)
    text = ", ".join(f"{field}: {msg}" for _, field, msg in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    details: dict[str, Any] = {"name": name} if name else {}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": r, "message": m, "field": f} for r, f, m in causes]
    return ApiError(422, "Invalid", f'{qkind} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(resource: str, group: str, name: str, why: str) -> ApiError:
    return ApiError(403, "Forbidden", f'{_qualified(resource, group)} "{name}" is forbidden: {why}',
                    _details(resource, group, name))


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def unsupported_media(custom: bool) -> ApiError:
    accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    if not custom:
        accepted += ", application/strategic-merge-patch+json"
    return ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted "
                    f"media types include: {accepted}")


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def internal(message: str) -> ApiError:
    """A plain Go error turned into a Status: code 500, no reason (StatusReasonUnknown)."""
    return ApiError(500, "", message)


def invalid_patch(why: str) -> ApiError:
    """NewGenericServerResponse(422): what the API server answers when a JSON patch cannot be applied."""
    return ApiError(422, "Invalid", "the server rejected our request due to an error in our request", {
        "causes": [{"reason": "UnexpectedServerResponse", "message": why}]})


def page_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")
