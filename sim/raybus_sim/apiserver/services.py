"""Services: ValidateService's port rules and the clusterIP / nodePort allocators (service CIDR
10.96.0.0/16, node ports 30000-32767) with upstream's messages.

Allocated values are tracked from the store's Service events, so a deleted Service frees its IP and
ports and a dry-run create consumes nothing.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from . import errors
from .gofmt import string_slice
from .validation_names import dns1123_label_errors, port_name_errors

if TYPE_CHECKING:
    from .store import Event

Cause = tuple[str, str, str]
CIDR = ipaddress.ip_network("10.96.0.0/16")
NODE_PORTS = (30000, 32767)
_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")


def _port_key_text(p: dict[str, Any]) -> str:
    # field.Duplicate(path, core.ServicePort{Protocol, Port}) prints the Go struct (%#v)
    return (f'core.ServicePort{{Name:"", Protocol:"{p.get("protocol", "TCP")}", AppProtocol:(*string)(nil), '
            f'Port:{p.get("port")}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:""}}, NodePort:0}}')


def service_causes(spec: Any) -> list[Cause]:
    spec = spec if isinstance(spec, dict) else {}
    stype = spec.get("type", "ClusterIP")
    ports = spec.get("ports") or []
    causes: list[Cause] = []
    if stype not in _TYPES:
        causes.append(("FieldValueNotSupported", "spec.type", f'Unsupported value: "{stype}": supported values: '
                       + ", ".join(f'"{t}"' for t in _TYPES)))
    if stype == "ExternalName" and not spec.get("externalName"):
        causes.append(("FieldValueRequired", "spec.externalName", "Required value"))
    if not ports and stype != "ExternalName" and spec.get("clusterIP") != "None":
        causes.append(("FieldValueRequired", "spec.ports", "Required value"))
    names: set[str] = set()
    for i, p in enumerate(ports):
        path = f"spec.ports[{i}]"
        name = p.get("name") or ""
        if len(ports) > 1 and not name:
            causes.append(("FieldValueRequired", f"{path}.name", "Required value"))
        elif name:
            errs = dns1123_label_errors(name)
            causes += [("FieldValueInvalid", f"{path}.name", f'Invalid value: "{name}": {e}') for e in errs]
            if not errs and name in names:
                causes.append(("FieldValueDuplicate", f"{path}.name", f'Duplicate value: "{name}"'))
            names.add(name)
        port = p.get("port")
        if not port:
            causes.append(("FieldValueRequired", f"{path}.port", "Required value"))
        elif not isinstance(port, int) or not 1 <= port <= 65535:
            causes.append(("FieldValueInvalid", f"{path}.port", (f"Invalid value: {port}: must be between 1 and "
                           f"65535, inclusive")))
        target = p.get("targetPort")
        if isinstance(target, str):
            causes += [("FieldValueInvalid", f"{path}.targetPort", f'Invalid value: "{target}": {e}')
                       for e in port_name_errors(target)]
        elif isinstance(target, int) and not isinstance(target, bool) and not 1 <= target <= 65535:
            causes.append(("FieldValueInvalid", f"{path}.targetPort", (f"Invalid value: {target}: must be between 1 "
                           f"and 65535, inclusive")))
        if p.get("protocol", "TCP") not in ("TCP", "UDP", "SCTP"):
            causes.append(("FieldValueNotSupported", f"{path}.protocol", (f'Unsupported value: "{p.get("protocol")}": '
                           f'supported values: "SCTP", "TCP", "UDP"')))
    for i, p in enumerate(ports):
        if p.get("nodePort") and stype not in ("NodePort", "LoadBalancer"):
            causes.append(("FieldValueForbidden", f"spec.ports[{i}].nodePort",
                           f"Forbidden: may not be used when `type` is '{stype}'"))
    seen: set[tuple[Any, Any]] = set()
    for i, p in enumerate(ports):
        key = (p.get("protocol", "TCP"), p.get("port"))
        if key in seen:
            causes.append(("FieldValueDuplicate", f"spec.ports[{i}]", f"Duplicate value: {_port_key_text(p)}"))
        seen.add(key)
    return causes


class ServiceAllocator:
    """clusterIPs and nodePorts in use, kept current from Service events."""

    def __init__(self) -> None:
        self.ips: dict[str, tuple[str, str]] = {}
        self.node_ports: dict[int, tuple[str, str]] = {}
        self._owned: dict[tuple[str, str], tuple[list[str], list[int]]] = {}
        self._next_ip = 10  # .1 is the kubernetes service
        self._next_port = 0

    def on_event(self, ev: Event) -> None:
        if ev.rt.gr == "services":
            self.track(ev.obj, deleted=ev.type == "DELETED")

    def track(self, svc: dict[str, Any], *, deleted: bool = False) -> None:
        meta = svc["metadata"]
        owner = (meta.get("namespace", ""), meta["name"])
        ips, ports = self._owned.pop(owner, ([], []))
        for ip in ips:
            self.ips.pop(ip, None)
        for port in ports:
            self.node_ports.pop(port, None)
        if deleted:
            return
        spec = svc.get("spec") or {}
        ips = [ip for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip and ip != "None"]
        ports = [int(p["nodePort"]) for p in spec.get("ports") or [] if p.get("nodePort")]
        self._owned[owner] = (ips, ports)
        for ip in ips:
            self.ips[ip] = owner
        for port in ports:
            self.node_ports[port] = owner

    def check(self, name: str, ns: str, spec: dict[str, Any], *, old: dict[str, Any] | None = None) -> None:
        """Explicitly requested values must be in range and free (422 from the allocator)."""
        owner = (ns, name)
        causes: list[Cause] = []
        ip = spec.get("clusterIP")
        if ip and ip != "None" and ip != (old or {}).get("clusterIP"):
            try:
                inside = ipaddress.ip_address(ip) in CIDR
            except ValueError:
                causes.append(("FieldValueInvalid", "spec.clusterIPs[0]", (f'Invalid value: "{ip}": must be a valid '
                               f"IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")))
            else:
                why = ("the provided network does not match the current range" if not inside else
                       "provided IP is already allocated" if self.ips.get(ip, owner) != owner else "")
                if why:
                    causes.append(("FieldValueInvalid", "spec.clusterIPs", (f"Invalid value: "
                                   f"{string_slice([ip])}: failed to allocate IP {ip}: {why}")))
        if spec.get("type") in ("NodePort", "LoadBalancer"):
            for i, p in enumerate(spec.get("ports") or []):
                port = p.get("nodePort")
                if not port:
                    continue
                if not NODE_PORTS[0] <= int(port) <= NODE_PORTS[1]:
                    why = (f"provided port is not in the valid range. The range of valid ports is "
                           f"{NODE_PORTS[0]}-{NODE_PORTS[1]}")
                elif self.node_ports.get(int(port), owner) != owner:
                    why = "provided port is already allocated"
                else:
                    continue
                causes.append(("FieldValueInvalid", f"spec.ports[{i}].nodePort", f"Invalid value: {port}: {why}"))
        if causes:
            raise errors.invalid("Service", "", name, causes)

    def allocate_ip(self) -> str:
        for _ in range(CIDR.num_addresses):
            self._next_ip = self._next_ip % (CIDR.num_addresses - 2) + 1
            ip = str(CIDR.network_address + self._next_ip)
            if ip not in self.ips and self._next_ip != 1:
                return ip
        raise errors.internal("failed to allocate a serviceIP: range is full")

    def allocate_node_port(self, taken: set[int]) -> int:
        size = NODE_PORTS[1] - NODE_PORTS[0] + 1
        for _ in range(size):
            port = NODE_PORTS[0] + self._next_port % size
            self._next_port += 1
            if port not in self.node_ports and port not in taken:
                return port
        raise errors.internal("failed to allocate a nodePort: range is full")
