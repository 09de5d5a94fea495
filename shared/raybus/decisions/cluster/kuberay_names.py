"""KubeRay's object names and their truncation rules (``utils/util.go``).

``CheckName`` keeps the *last* 50 characters of an over-long name (then replaces a leading digit or
punctuation character with ``r``); ``CheckLabel`` does the same with 63; ``PodName`` keeps the
*first* 50 characters of the prefix. All three are reproduced byte for byte.
"""

from __future__ import annotations

import unicodedata

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.settings import OperatorSettings


def _is_go_digit(ch: str) -> bool:
    return unicodedata.category(ch) == "Nd"  # unicode.IsDigit


def _is_go_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")  # unicode.IsPunct (category P*)


def check_name(name: str) -> str:
    """utils.CheckName: keep the last 50 chars; a leading digit/punctuation becomes ``r``."""
    if len(name) > k.MAX_NAME_LENGTH:
        name = name[len(name) - k.MAX_NAME_LENGTH :]
    if name and (_is_go_digit(name[0]) or _is_go_punct(name[0])):
        name = "r" + name[1:]
    return name


def check_label(value: str) -> str:
    """utils.CheckLabel: keep the last 63 chars; a leading punctuation char becomes ``r``."""
    if len(value) > k.MAX_LABEL_LENGTH:
        value = value[len(value) - k.MAX_LABEL_LENGTH :]
    if value and _is_go_punct(value[0]):
        value = "r" + value[1:]
    return value


def generate_identifier(cluster_name: str, node_type: str) -> str:
    """utils.GenerateIdentifier: ``<cluster>-<head|worker>`` (value of ray.io/identifier before CheckLabel)."""
    return f"{cluster_name}-{node_type}"


def pod_name(prefix: str, node_type: str, *, generate_name: bool) -> str:
    """utils.PodName: first 50 chars of ``prefix`` + ``-<nodeType>`` (+ ``-`` for generateName), lower-cased."""
    result = f"{prefix[: k.MAX_NAME_LENGTH]}-{node_type}".lower()
    return result + "-" if generate_name else result


def head_service_name(cluster: RayCluster) -> str:
    """utils.GenerateHeadServiceName(RayClusterCRD, ...): headService.metadata.name or ``<cluster>-head-svc``."""
    custom = cluster.spec.head_group_spec.head_service
    if custom:
        name = (custom.get("metadata") or {}).get("name")
        if name:
            return str(name)
    return check_name(f"{cluster.name}-{k.HEAD_NODE}-svc")


def owner_head_service_name(owner_name: str) -> str:
    """utils.GenerateHeadServiceName(RayServiceCRD|RayJobCRD, ...): ``CheckName(<owner>-head-svc)``."""
    return check_name(f"{owner_name}-{k.HEAD_NODE}-svc")


def fqdn_ray_ip(cluster: RayCluster, *, settings: OperatorSettings) -> str:
    """utils.GenerateFQDNServiceName: ``<head-svc>.<namespace>.svc.<cluster domain>``."""
    return f"{head_service_name(cluster)}.{cluster.namespace}.svc.{settings.cluster_domain}"


def extract_ray_ip_from_fqdn(fqdn: str) -> str:
    """utils.ExtractRayIPFromFQDN (deprecated RAY_IP): the first DNS label."""
    return fqdn.split(".")[0]


def serve_service_name(owner_name: str) -> str:
    """utils.GenerateServeServiceName: ``CheckName(<name>-serve-svc)``."""
    return check_name(f"{owner_name}-{k.SERVE_NAME}-svc")


def serve_service_label(owner_name: str) -> str:
    """utils.GenerateServeServiceLabel: ``<name>-serve`` (value of ray.io/serve on the Service)."""
    return f"{owner_name}-{k.SERVE_NAME}"


def headless_worker_service_name(cluster: RayCluster) -> str:
    """BuildHeadlessServiceForRayCluster: ``<cluster>-headless`` (no CheckName)."""
    return f"{cluster.name}-{k.HEADLESS_SERVICE_SUFFIX}"


def ingress_name(cluster: RayCluster) -> str:
    """utils.GenerateIngressName: ``<cluster>-head-ingress`` (no CheckName)."""
    return f"{cluster.name}-{k.HEAD_NODE}-ingress"


def head_group_service_account_name(cluster: RayCluster) -> str:
    """utils.GetHeadGroupServiceAccountName: the head template's serviceAccountName, else the cluster name."""
    spec = cluster.spec.head_group_spec.template.get("spec") or {}
    return str(spec.get("serviceAccountName") or "") or cluster.name
