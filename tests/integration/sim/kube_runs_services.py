"""Requests of the README's section 3-services."""

from __future__ import annotations

from typing import Any

from .kube_http import Answer, Api, Json, case

S3 = "3-services"


def svc(name: str, *ports: Json, **spec: Any) -> Json:
    body: Json = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                  "spec": {"selector": {"app": name}, **spec}}
    if ports:
        body["spec"]["ports"] = list(ports)
    return body


def _svc_case(title: str, body: Json) -> None:
    async def run(api: Api) -> Answer:
        return (await api.create("services", body)).answer()
    case(S3, title)(run)


_svc_case("headless + publishNotReadyAddresses",
          svc("headless", {"name": "gcs", "port": 6379}, clusterIP="None", publishNotReadyAddresses=True))
_svc_case("ClusterIP service defaults",
          svc("plain", {"name": "a", "port": 80, "targetPort": "http"}, {"name": "b", "port": 81}))
_svc_case("duplicate port names", svc("dupname", {"name": "a", "port": 80}, {"name": "a", "port": 81}))
_svc_case("duplicate port/protocol", svc("dupport", {"name": "a", "port": 80}, {"name": "b", "port": 80}))
_svc_case("two ports, one unnamed", svc("noname", {"name": "a", "port": 80}, {"port": 81}))
_svc_case("port 70000", svc("bigport", {"port": 70000}))
_svc_case("targetPort 0 / invalid named targetPort", svc("badtp", {"port": 80, "targetPort": "Bad_Name"}))
_svc_case("64-char service name", svc("s" * 64, {"port": 80}))
_svc_case("service name starting with digit", svc("1svc", {"port": 80}))
_svc_case("NodePort with explicit nodePort 30080", svc("np1", {"port": 80, "nodePort": 30080}, type="NodePort"))
_svc_case("nodePort 20000 out of range", svc("np3", {"port": 80, "nodePort": 20000}, type="NodePort"))
_svc_case("ClusterIP type with nodePort set", svc("np4", {"port": 80, "nodePort": 30081}, type="ClusterIP"))
_svc_case("clusterIP outside service CIDR", svc("badip", {"port": 80}, clusterIP="192.168.1.1"))
_svc_case("ExternalName service", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
                                   "spec": {"type": "ExternalName", "externalName": "example.com"}})


@case(S3, "update changes clusterIP")
async def _update_cluster_ip(api: Api) -> Answer:
    created = await api.ok("services", svc("plain", {"port": 80}))
    ip = created["spec"]["clusterIP"]
    other = ip.rsplit(".", 1)[0] + (".201" if not ip.endswith(".201") else ".202")
    created["spec"]["clusterIP"], created["spec"]["clusterIPs"] = other, [other]
    return (await api.put("services", "plain", created)).answer()


@case(S3, "update headless -> ClusterIP (clusterIP '' )")
async def _update_headless(api: Api) -> Answer:
    created = await api.ok("services", svc("hl", {"port": 80}, clusterIP="None"))
    created["spec"]["clusterIP"] = ""
    created["spec"].pop("clusterIPs", None)
    return (await api.put("services", "hl", created)).answer()


@case(S3, "update omitting clusterIP keeps it")
async def _update_keeps_ip(api: Api) -> Answer:
    created = await api.ok("services", svc("keep", {"port": 80}))
    ip = created["spec"]["clusterIP"]
    for key in ("clusterIP", "clusterIPs"):
        created["spec"].pop(key)
    created["metadata"]["labels"] = {"touched": "yes"}
    r = await api.put("services", "keep", created)
    return r.answer(kept=r.code == 200 and r.body["spec"]["clusterIP"] == ip)


@case(S3, "NodePort duplicate nodePort 30080 (allocated)")
async def _node_port_taken(api: Api) -> Answer:
    await api.ok("services", svc("np1", {"port": 80, "nodePort": 30080}, type="NodePort"))
    return (await api.create("services", svc("np2", {"port": 80, "nodePort": 30080}, type="NodePort"))).answer()


@case(S3, "NodePort auto-allocated nodePort in range")
async def _node_port_auto(api: Api) -> Answer:
    r = await api.create("services", svc("np5", {"port": 80}, type="NodePort"))
    port = r.body["spec"]["ports"][0].get("nodePort", 0) if r.code == 201 else 0
    return r.answer(inrange=30000 <= port <= 32767)
