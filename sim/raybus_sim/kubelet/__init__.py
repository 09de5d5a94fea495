"""The simulated node: scheduler part + kubelet, an API client (client.py) of the local or a real API server."""

from .kubelet import Delays, Kubelet, KubeletConfig

__all__ = ["Delays", "Kubelet", "KubeletConfig"]
