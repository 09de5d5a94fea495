"""Local Kubernetes API server for dev/tests: see README.md in this package for the semantics list."""

from .app import DEFAULT_CRD_DIR, RunningApiServer, create_app, start_apiserver, write_kubeconfig

__all__ = ["DEFAULT_CRD_DIR", "RunningApiServer", "create_app", "start_apiserver", "write_kubeconfig"]
