"""Decode the few protobuf request bodies kubectl's typed generators send (`kubectl create configmap|secret|
namespace|serviceaccount|role|rolebinding`). Field numbers come from k8s.io/api generated.proto; other
kinds are answered with 415 (see README)."""

from __future__ import annotations

import base64
from typing import Any

from . import errors

MAGIC = b"k8s\x00"
Schema = dict[int, tuple[str, str]]

OWNER_REF: Schema = {1: ("kind", "str"), 3: ("name", "str"), 4: ("uid", "str"), 5: ("apiVersion", "str"),
                     6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")}
OBJECT_META: Schema = {1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"),
                       11: ("labels", "map_str"), 12: ("annotations", "map_str"),
                       13: ("ownerReferences", "rep_msg:owner"), 14: ("finalizers", "rep_str")}
OBJECT_REF: Schema = {1: ("kind", "str"), 2: ("namespace", "str"), 3: ("name", "str"), 4: ("uid", "str"),
                      5: ("apiVersion", "str")}
LOCAL_REF: Schema = {1: ("name", "str")}
POLICY_RULE: Schema = {1: ("verbs", "rep_str"), 2: ("apiGroups", "rep_str"), 3: ("resources", "rep_str"),
                       4: ("resourceNames", "rep_str"), 5: ("nonResourceURLs", "rep_str")}
SUBJECT: Schema = {1: ("kind", "str"), 2: ("apiGroup", "str"), 3: ("name", "str"), 4: ("namespace", "str")}
ROLE_REF: Schema = {1: ("apiGroup", "str"), 2: ("kind", "str"), 3: ("name", "str")}
NS_SPEC: Schema = {1: ("finalizers", "rep_str")}
MESSAGES: dict[str, Schema] = {"meta": OBJECT_META, "owner": OWNER_REF, "objref": OBJECT_REF, "localref": LOCAL_REF,
                               "rule": POLICY_RULE, "subject": SUBJECT, "roleref": ROLE_REF, "nsspec": NS_SPEC}
KINDS: dict[str, Schema] = {
    "ConfigMap": {1: ("metadata", "msg:meta"), 2: ("data", "map_str"), 3: ("binaryData", "map_bytes"),
                  4: ("immutable", "bool")},
    "Secret": {1: ("metadata", "msg:meta"), 2: ("data", "map_bytes"), 3: ("type", "str"),
               4: ("stringData", "map_str"), 5: ("immutable", "bool")},
    "Namespace": {1: ("metadata", "msg:meta"), 2: ("spec", "msg:nsspec")},
    "ServiceAccount": {1: ("metadata", "msg:meta"), 2: ("secrets", "rep_msg:objref"),
                       3: ("imagePullSecrets", "rep_msg:localref"), 4: ("automountServiceAccountToken", "bool")},
    "Role": {1: ("metadata", "msg:meta"), 2: ("rules", "rep_msg:rule")},
    "ClusterRole": {1: ("metadata", "msg:meta"), 2: ("rules", "rep_msg:rule")},
    "RoleBinding": {1: ("metadata", "msg:meta"), 2: ("subjects", "rep_msg:subject"), 3: ("roleRef", "msg:roleref")},
    "ClusterRoleBinding": {1: ("metadata", "msg:meta"), 2: ("subjects", "rep_msg:subject"),
                           3: ("roleRef", "msg:roleref")},
}


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) in order; value is int for varints, bytes for length-delimited."""
    out: list[tuple[int, int, Any]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        val: int | bytes
        if wire == 0:
            val, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            val, i = buf[i:i + n], i + n
        elif wire == 1:
            val, i = buf[i:i + 8], i + 8
        elif wire == 5:
            val, i = buf[i:i + 4], i + 4
        else:
            raise errors.bad_request(f"unsupported protobuf wire type {wire}")
        out.append((num, wire, val))
    return out


def _message(buf: bytes, schema: Schema) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for num, _, val in _fields(buf):
        if num not in schema:
            continue
        name, kind = schema[num]
        if kind == "str":
            if val:  # proto2 sends empty optionals; Go's JSON would omit them (omitempty)
                obj[name] = val.decode()
        elif kind == "bool":
            obj[name] = bool(val)
        elif kind.startswith("msg:"):
            obj[name] = _message(val, MESSAGES[kind[4:]])
        elif kind.startswith("rep_msg:"):
            obj.setdefault(name, []).append(_message(val, MESSAGES[kind[8:]]))
        elif kind == "rep_str":
            obj.setdefault(name, []).append(val.decode())
        elif kind in ("map_str", "map_bytes"):
            entry = {n: v for n, _, v in _fields(val)}
            key, value = entry.get(1, b"").decode(), entry.get(2, b"")
            obj.setdefault(name, {})[key] = value.decode() if kind == "map_str" else base64.b64encode(value).decode()
    return obj


def decode(raw: bytes) -> dict[str, Any]:
    if not raw.startswith(MAGIC):
        raise errors.bad_request("protobuf body without the k8s envelope")
    envelope = {n: v for n, _, v in _fields(raw[len(MAGIC):])}
    type_meta = {n: v for n, _, v in _fields(envelope.get(1, b""))}
    api_version, kind = type_meta.get(1, b"").decode(), type_meta.get(2, b"").decode()
    schema = KINDS.get(kind)
    if schema is None:
        raise errors.ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                              f"raybus-sim decodes protobuf only for {', '.join(sorted(KINDS))} (got {kind}); "
                              f"use kubectl apply/create -f")
    obj = _message(envelope.get(2, b""), schema)
    obj["apiVersion"], obj["kind"] = api_version, kind
    return obj
