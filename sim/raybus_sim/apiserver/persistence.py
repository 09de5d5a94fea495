"""state_file persistence: all objects + the resourceVersion counter, written on graceful stop."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .store import Obj, Store


def dump_state(store: Store, path: Path) -> None:
    objs = [{"gr": gr, "obj": o} for gr, st in store.states.items() for o in st.objects.values()]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"resourceVersion": store.rv, "objects": objs}))
    tmp.replace(path)  # atomic: a crash mid-write keeps the previous snapshot


def load_state(store: Store, path: Path, register_crd: Callable[[Obj], Any]) -> None:
    data = json.loads(path.read_text())
    entries = data.get("objects") or []
    for e in entries:  # CRDs first so their resources exist
        if e["gr"] == "customresourcedefinitions.apiextensions.k8s.io":
            register_crd(e["obj"])
    for e in entries:
        obj, gr = e["obj"], e["gr"]
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        store.state(gr).objects[key] = obj
        store.uid_index[meta["uid"]] = (gr, key)
        for ref in meta.get("ownerReferences") or ():
            store.owner_index.setdefault(ref["uid"], set()).add((gr, key))
    for svc in store.state("services").objects.values():  # restored clusterIPs/nodePorts stay taken
        store.services.track(svc)
    store.rv = max(store.rv, int(data.get("resourceVersion", 1)))
    store.base_rv = store.rv
    # History is not persisted: anything older than now is expired after a restart.
    for st in store.states.values():
        st.window_start = store.rv
