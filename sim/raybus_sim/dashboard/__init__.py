"""Simulated Ray dashboards: one aiohttp process hosts a virtual head per (namespace, cluster).

Entry points: `create_dashboard_app(registry)` and `python -m raybus_sim.dashboard --port N`.
Routing is described in `app.py`, the control API in `control.py`, the registry API (used by the
simulated kubelet: `head_up` / `head_down`) in `registry.py`.
"""

from raybus_sim.dashboard.app import create_dashboard_app
from raybus_sim.dashboard.registry import ClusterSettings, ClusterState, DashboardRegistry

__all__ = ["ClusterSettings", "ClusterState", "DashboardRegistry", "create_dashboard_app"]
