"""`python -m service_reconciler`: flags/env -> settings -> run until SIGTERM (runtime.reconciler_app)."""

from __future__ import annotations

from raybus.runtime.reconciler_app import reconciler_main
from service_reconciler.app import create_app

SERVICE = "service-reconciler"


def main() -> None:
    reconciler_main(SERVICE, create_app)


if __name__ == "__main__":
    main()
