"""`python -m cluster_reconciler`: flags/env -> settings -> run until SIGTERM (runtime.reconciler_app)."""

from __future__ import annotations

from cluster_reconciler.app import create_app
from raybus.runtime.reconciler_app import reconciler_main

SERVICE = "cluster-reconciler"


def main() -> None:
    reconciler_main(SERVICE, create_app)


if __name__ == "__main__":
    main()
