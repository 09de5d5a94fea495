"""The local API server's stand-ins for kube-controller-manager's Job and EndpointSlice
controllers. They use the Store directly and run inside the local API server only: a real control
plane runs the real ones, and the simulated node (raybus_sim.kubelet) never does."""

from .endpoints import EndpointSliceController
from .jobs import JobController

__all__ = ["EndpointSliceController", "JobController"]
