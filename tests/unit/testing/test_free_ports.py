"""free_ports: distinct ports in one call (separate free_port() calls may repeat one)."""

from __future__ import annotations

import socket

from raybus_sim.testing.servers import free_ports


def test_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(60)
    assert len(set(ports)) == 60
    for port in ports:  # released: each one can be bound now
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))
