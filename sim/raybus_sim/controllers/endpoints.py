"""EndpointSlice controller stand-in: one IPv4 slice per selector-bearing Service, following pod IPs."""

from __future__ import annotations

from typing import Any

from raybus_sim.apiserver.store import Event, Obj, Store
from raybus_sim.controllers.keyed import KeyedController

MANAGED_BY = "endpointslice-controller.k8s.io"


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


Pair = tuple[str, str, str]  # namespace, label key, label value


def _index(index: dict[Pair, set[str]], ns: str, labels: dict[str, str], name: str, *, add: bool) -> None:
    for key, value in labels.items():
        names = index.setdefault((ns, key, value), set())
        if add:
            names.add(name)
        else:
            names.discard(name)
            if not names:
                del index[(ns, key, value)]


class EndpointSliceController(KeyedController):
    """Label indexes (pods by label, services by one pair of their selector, slices by service)
    keep a pod event and a service sync proportional to what they touch, not to every pod and
    service of the namespace: thousands of Ray pods pass through here in the benchmarks."""

    name = "endpointslice"

    def __init__(self, store: Store, *, debounce: float = 0.01) -> None:
        super().__init__(store, debounce=debounce)
        reg = store.registry
        self.svc_rt = reg.get("", "v1", "services")
        self.pod_rt = reg.get("", "v1", "pods")
        self.slice_rt = reg.get("discovery.k8s.io", "v1", "endpointslices")
        self.ep_rt = reg.get("", "v1", "endpoints")
        self._pods: dict[Pair, set[str]] = {}
        self._selectors: dict[tuple[str, str], dict[str, str]] = {}
        self._services: dict[Pair, set[str]] = {}  # by one pair of the selector (_index_service)
        self._chosen: dict[tuple[str, str], Pair] = {}
        self._slices: dict[tuple[str, str], set[str]] = {}  # (ns, service) -> managed slice names
        store.listeners.append(self.on_event)

    def start(self) -> None:
        assert self.svc_rt is not None and self.pod_rt is not None and self.slice_rt is not None
        for pod in self.store.list(self.pod_rt, None):
            self._index_pod(pod, add=True)
        for sl in self.store.list(self.slice_rt, None):
            self._index_slice(sl, add=True)
        services = self.store.list(self.svc_rt, None)
        for svc in services:
            self._index_service(svc, add=True)
        self.start_with(services)

    def _index_pod(self, pod: Obj, *, add: bool) -> None:
        m = pod["metadata"]
        _index(self._pods, m.get("namespace", ""), m.get("labels") or {}, m["name"], add=add)

    def _index_service(self, svc: Obj, *, add: bool) -> None:
        """A service is indexed under one pair of its selector: the one fewest services share
        (every Ray Service selects app.kubernetes.io/created-by=kuberay-operator, but only one
        selects its own ray.io/cluster)."""
        ns, name = svc["metadata"].get("namespace", ""), svc["metadata"]["name"]
        self._selectors.pop((ns, name), None)
        chosen = self._chosen.pop((ns, name), None)
        if chosen is not None:
            self._services.get(chosen, set()).discard(name)
        selector = (svc.get("spec") or {}).get("selector") or {}
        if add and selector:
            self._selectors[(ns, name)] = dict(selector)
            pair = min(selector.items(), key=lambda kv: (len(self._services.get((ns, *kv), ())), kv))
            self._chosen[(ns, name)] = (ns, *pair)
            self._services.setdefault((ns, *pair), set()).add(name)

    def _index_slice(self, sl: Obj, *, add: bool) -> None:
        labels = sl["metadata"].get("labels") or {}
        service = labels.get("kubernetes.io/service-name")
        if not service or labels.get("endpointslice.kubernetes.io/managed-by") != MANAGED_BY:
            return
        names = self._slices.setdefault((sl["metadata"].get("namespace", ""), service), set())
        if add:
            names.add(sl["metadata"]["name"])
        else:
            names.discard(sl["metadata"]["name"])

    def on_event(self, ev: Event) -> None:
        gr, deleted = ev.rt.gr, ev.type == "DELETED"
        if gr == "services":
            self._index_service(ev.obj, add=not deleted)
            self.mark(ev.obj["metadata"]["namespace"], ev.obj["metadata"]["name"])
        elif gr == "endpointslices.discovery.k8s.io":
            self._index_slice(ev.obj, add=not deleted)
        elif gr == "pods":
            ns = ev.obj["metadata"].get("namespace", "")
            labels = ev.obj["metadata"].get("labels") or {}
            old_labels = (ev.old or {}).get("metadata", {}).get("labels") or {}
            if ev.old is not None:
                self._index_pod(ev.old, add=False)
            self._index_pod(ev.obj, add=not deleted)
            for key, value in {**old_labels, **labels}.items() | old_labels.items():
                for name in list(self._services.get((ns, key, value), ())):
                    sel = self._selectors.get((ns, name)) or {}
                    if sel and (_selects(sel, labels) or _selects(sel, old_labels)):
                        self.mark(ns, name)

    def _selected(self, ns: str, selector: dict[str, str]) -> list[Obj]:
        assert self.pod_rt is not None
        sets = [self._pods.get((ns, k, v), set()) for k, v in selector.items()]
        names = set.intersection(*sets) if sets else set()
        found = (self.store.find(self.pod_rt, ns, n) for n in names)
        return [p for p in found if p is not None]

    def _ports(self, svc: Obj, pods: list[Obj]) -> list[dict[str, Any]]:
        out = []
        for p in (svc.get("spec") or {}).get("ports") or []:
            target = p.get("targetPort", p.get("port"))
            if isinstance(target, str) and not target.isdigit():
                named = [cp.get("containerPort") for pod in pods for c in pod["spec"].get("containers") or []
                         for cp in c.get("ports") or [] if cp.get("name") == target]
                if not named:
                    continue
                target = named[0]
            out.append({"name": p.get("name", ""), "port": int(target), "protocol": p.get("protocol", "TCP")})
        return out

    def _sync_endpoints(self, svc: Obj, endpoints: list[Obj], ports: list[Obj]) -> None:
        """core/v1 Endpoints, which 1.32 clusters still maintain next to EndpointSlices."""
        if self.ep_rt is None:
            return
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]

        def address(e: Obj) -> Obj:
            return {"ip": e["addresses"][0], "nodeName": e["nodeName"], "targetRef": e["targetRef"]}

        ready = [address(e) for e in endpoints if e["conditions"]["ready"]]
        not_ready = [address(e) for e in endpoints if not e["conditions"]["ready"]]
        subset: Obj = {}
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        if subset:
            subset["ports"] = [{k: v for k, v in p.items() if v != ""} for p in ports]
        body: Obj = {"subsets": [subset]} if subset else {}
        cur = self.store.find(self.ep_rt, ns, name)
        labels = dict(svc["metadata"].get("labels") or {})
        if cur is None:
            self.store.create(self.ep_rt, ns, {**body, "metadata": {"name": name, "labels": labels}})
        elif cur.get("subsets") != body.get("subsets") or (cur["metadata"].get("labels") or {}) != labels:
            new = {k: v for k, v in cur.items() if k != "subsets"}
            new["metadata"] = dict(cur["metadata"], labels=labels)
            self.store.update(self.ep_rt, ns, name, {**new, **body})

    def sync(self, ns: str, name: str) -> None:
        assert self.svc_rt and self.pod_rt and self.slice_rt
        svc = self.store.find(self.svc_rt, ns, name)
        if svc is None:  # the endpoints controller removes a deleted service's Endpoints (slices go by GC)
            if self.ep_rt is not None and self.store.find(self.ep_rt, ns, name) is not None:
                self.store.delete(self.ep_rt, ns, name)
            return
        selector = (svc.get("spec") or {}).get("selector")
        existing = [s for s in (self.store.find(self.slice_rt, ns, n)
                                for n in sorted(self._slices.get((ns, name), ()))) if s is not None]
        if not selector:
            for s in existing:
                self.store.delete(self.slice_rt, ns, s["metadata"]["name"])
            return
        pods = [p for p in self._selected(ns, selector)
                if (p.get("status") or {}).get("podIP")
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        pods.sort(key=lambda p: p["metadata"]["name"])
        endpoints = []
        for p in pods:
            ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in p["status"].get("conditions") or [])
            terminating = bool(p["metadata"].get("deletionTimestamp"))
            endpoints.append({
                "addresses": [p["status"]["podIP"]],
                "conditions": {"ready": ready and not terminating, "serving": ready, "terminating": terminating},
                "nodeName": p["spec"].get("nodeName"),
                "targetRef": {"kind": "Pod", "namespace": ns, "name": p["metadata"]["name"],
                              "uid": p["metadata"]["uid"]},
            })
        body: Obj = {
            "addressType": "IPv4", "endpoints": endpoints, "ports": self._ports(svc, pods),
        }
        self._sync_endpoints(svc, endpoints, body["ports"])
        if existing:
            cur = existing[0]
            if cur.get("endpoints") == body["endpoints"] and cur.get("ports") == body["ports"]:
                return
            self.store.update(self.slice_rt, ns, cur["metadata"]["name"], {**cur, **body})
            return
        labels = {**(svc["metadata"].get("labels") or {}), "kubernetes.io/service-name": name,
                  "endpointslice.kubernetes.io/managed-by": MANAGED_BY}
        self.store.create(self.slice_rt, ns, {**body, "metadata": {
            "generateName": f"{name}-", "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name, "uid": svc["metadata"]["uid"],
                                 "controller": True, "blockOwnerDeletion": True}]}})
