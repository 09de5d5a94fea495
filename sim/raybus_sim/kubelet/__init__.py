"""Simulated scheduler/kubelet/endpointslice/job controllers running inside the local API server."""

from .kubelet import Delays, Kubelet, KubeletConfig

__all__ = ["Delays", "Kubelet", "KubeletConfig"]
