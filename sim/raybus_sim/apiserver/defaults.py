"""Create-time defaulting that controllers observe on real clusters (pod/service/job/namespace/secret)."""

from __future__ import annotations

import base64
import datetime as dt
import time
import uuid
from typing import TYPE_CHECKING, Any

from . import errors
from .quantity import amount, canonical, canonical_map
from .resources import ResourceType

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"

if TYPE_CHECKING:
    from .store import Store


_NOW_CACHE: list[Any] = [0, ""]


def now_rfc3339() -> str:
    # Second resolution (metav1.Time); formatting once per second keeps bursts of writes cheap.
    sec = int(time.time())
    if _NOW_CACHE[0] != sec:
        _NOW_CACHE[0] = sec
        _NOW_CACHE[1] = dt.datetime.fromtimestamp(sec, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(_NOW_CACHE[1])


def qos_class(spec: dict[str, Any]) -> str:
    """GetPodQOS: BestEffort without requests/limits, Guaranteed when cpu+memory limits equal requests."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or amount(req.get(r, lim[r])) != amount(lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _default_container(c: dict[str, Any]) -> None:
    image = c.get("image") or ""
    tag = image.rsplit("/", 1)[-1]
    c.setdefault("imagePullPolicy", "IfNotPresent" if ":" in tag and not tag.endswith(":latest") else "Always")
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    res = c["resources"]
    for k in ("limits", "requests"):
        if k in res:
            res[k] = canonical_map(res[k])
    # requests default to limits, as the API server does
    if res.get("limits"):
        res["requests"] = {**res["limits"], **(res.get("requests") or {})}
    for p in c.get("ports") or []:
        p.setdefault("protocol", "TCP")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if isinstance(c.get(probe), dict):
            _default_probe(c[probe])
    for env in c.get("env") or []:
        ref = (env.get("valueFrom") or {}).get("fieldRef")
        if isinstance(ref, dict):
            ref.setdefault("apiVersion", "v1")
        rref = (env.get("valueFrom") or {}).get("resourceFieldRef")
        if isinstance(rref, dict):
            rref["divisor"] = canonical(rref.get("divisor", 0))


def _default_probe(probe: dict[str, Any]) -> None:
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    if isinstance(probe.get("httpGet"), dict):
        probe["httpGet"].setdefault("scheme", "HTTP")
        probe["httpGet"].setdefault("path", "/")


def _default_volume(vol: dict[str, Any]) -> None:
    for kind in ("configMap", "secret", "projected", "downwardAPI"):
        if isinstance(vol.get(kind), dict):
            vol[kind].setdefault("defaultMode", 420)
    if isinstance(vol.get("hostPath"), dict):
        vol["hostPath"].setdefault("type", "")
    if isinstance(vol.get("emptyDir"), dict) and "sizeLimit" in vol["emptyDir"]:
        vol["emptyDir"]["sizeLimit"] = canonical(vol["emptyDir"]["sizeLimit"])


def default_pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        spec.setdefault("serviceAccountName", spec.get("serviceAccount"))
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
    for c in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        _default_container(c)
    for vol in spec.get("volumes") or []:
        _default_volume(vol)


SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def _inject_sa_token(obj: dict[str, Any], store: Store) -> None:
    """ServiceAccount admission: the SA must exist (403 otherwise) and its token volume is mounted."""
    spec, meta = obj["spec"], obj["metadata"]
    sa_rt = store.registry.get("", "v1", "serviceaccounts")
    sa_name = spec["serviceAccountName"]
    sa = store.find(sa_rt, meta["namespace"], sa_name) if sa_rt else None
    if sa is None:
        raise errors.forbidden("pods", "", meta["name"], f"error looking up service account "
                               f"{meta['namespace']}/{sa_name}: serviceaccount \"{sa_name}\" not found")
    automount = spec.get("automountServiceAccountToken", sa.get("automountServiceAccountToken", True))
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    if automount is False or any(m.get("mountPath") == SA_MOUNT for c in containers
                                 for m in c.get("volumeMounts") or []):
        return
    name = "kube-api-access-" + "".join(_ALPHABET[b % len(_ALPHABET)] for b in uuid.uuid4().bytes[:5])
    spec.setdefault("volumes", []).append({"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                      "fieldPath": "metadata.namespace"}}]}}]}})
    for c in containers:
        c.setdefault("volumeMounts", []).append({"name": name, "mountPath": SA_MOUNT, "readOnly": True})


def _default_pod(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    default_pod_spec(spec)
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    # DefaultTolerationSeconds admission
    spec.setdefault("tolerations", [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
    ])


def _default_service(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    for p in spec.get("ports") or []:
        p.setdefault("protocol", "TCP")
        p.setdefault("targetPort", p.get("port"))
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)


def _allocate_service(obj: dict[str, Any], store: Store) -> None:
    """The service registry's allocators (run after validation; explicit values were checked)."""
    spec = obj["spec"]
    if spec["type"] != "ExternalName":
        if not spec.get("clusterIP"):
            spec["clusterIP"] = store.services.allocate_ip()
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    if spec["type"] in ("NodePort", "LoadBalancer"):
        taken = {int(p["nodePort"]) for p in spec.get("ports") or [] if p.get("nodePort")}
        for p in spec.get("ports") or []:
            if not p.get("nodePort"):
                p["nodePort"] = store.services.allocate_node_port(taken)
                taken.add(p["nodePort"])
    obj["status"] = {"loadBalancer": {}}


def _template_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    tmpl = (obj.get("spec") or {}).get("template") if isinstance(obj.get("spec"), dict) else None
    spec = tmpl.get("spec") if isinstance(tmpl, dict) else None
    return spec if isinstance(spec, dict) else None


def apply_update_defaults(rt: ResourceType, new: dict[str, Any], old: dict[str, Any]) -> None:
    """Defaulting that upstream applies to every write of a typed object (so a PUT that omits defaulted
    fields is not a change), plus the service registry's patchAllocatedValues."""
    if rt.gr == "pods" and isinstance(new.get("spec"), dict):
        default_pod_spec(new["spec"])
        return
    if rt.gr in _TEMPLATED:
        tspec = _template_spec(new)
        if tspec is not None:
            default_pod_spec(tspec)
        return
    if rt.gr != "services":
        return
    nspec, ospec = new.get("spec"), old.get("spec") or {}
    if not isinstance(nspec, dict):
        return
    for k in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        if not nspec.get(k) and ospec.get(k):
            nspec[k] = ospec[k]
    old_ports = {(p.get("port"), p.get("protocol", "TCP")): p for p in ospec.get("ports") or []}
    for p in nspec.get("ports") or []:
        p.setdefault("protocol", "TCP")
        p.setdefault("targetPort", p.get("port"))
        prev = old_ports.get((p.get("port"), p["protocol"]))
        if not p.get("nodePort") and prev and prev.get("nodePort") and nspec.get("type") in ("NodePort", "LoadBalancer"):
            p["nodePort"] = prev["nodePort"]


def _default_job(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    uid, name = obj["metadata"]["uid"], obj["metadata"]["name"]
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        tmeta = spec.setdefault("template", {}).setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), "batch.kubernetes.io/controller-uid": uid,
                           "batch.kubernetes.io/job-name": name, "controller-uid": uid, "job-name": name}
    default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    obj["status"] = {}


def _default_secret(obj: dict[str, Any]) -> None:
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()


_TEMPLATED = ("jobs.batch", "deployments.apps", "statefulsets.apps")


def default_object(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Scheme defaulting (and defaulting admission), applied before validation as upstream's decoder does."""
    gr = rt.gr
    if gr == "pods":
        _default_pod(obj)
    elif gr == "services":
        _default_service(obj)
    elif gr in _TEMPLATED:
        tspec = _template_spec(obj)
        if tspec is not None:
            default_pod_spec(tspec)
    elif gr == "secrets":
        _default_secret(obj)


def admit(rt: ResourceType, obj: dict[str, Any], store: Store) -> None:
    """Mutating admission that can refuse (ServiceAccount admission for pods: 403)."""
    if rt.gr == "pods":
        _inject_sa_token(obj, store)


def apply_create_defaults(rt: ResourceType, obj: dict[str, Any], store: Store) -> None:
    """What the registries set on create once the object is valid: allocations, status resets."""
    gr = rt.gr
    if gr == "pods":
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj["spec"])}
    elif gr == "services":
        _allocate_service(obj, store)
    elif gr == "jobs.batch":
        _default_job(obj)
    elif gr == "namespaces":
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
    elif gr == "persistentvolumeclaims":
        res = (obj.get("spec") or {}).get("resources") or {}
        for k in ("requests", "limits"):
            if k in res:
                res[k] = canonical_map(res[k])
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}
    elif gr == "ingresses.networking.k8s.io":
        obj["status"] = {"loadBalancer": {}}
    elif gr == "customresourcedefinitions.apiextensions.k8s.io":
        fins = obj["metadata"].setdefault("finalizers", [])
        if CRD_CLEANUP not in fins:  # deleting the CRD first deletes its objects (gc.py)
            fins.append(CRD_CLEANUP)
        names = (obj.get("spec") or {}).get("names") or {}
        accepted = {**names, "singular": names.get("singular") or str(names.get("kind", "")).lower(),
                    "listKind": names.get("listKind") or f"{names.get('kind')}List"}
        now = now_rfc3339()
        obj["status"] = {"acceptedNames": accepted, "storedVersions": [
            v["name"] for v in obj["spec"].get("versions") or [] if v.get("storage")],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now}]}
    elif rt.status_subresource:
        obj.pop("status", None)
