"""`python -m job_reconciler`: flags/env -> settings -> run until SIGTERM."""

from __future__ import annotations

import asyncio

from job_reconciler.app import create_app
from raybus.runtime.service import common_parser, common_settings, run_service

SERVICE = "job-reconciler"


def main() -> None:
    settings = common_settings(SERVICE, common_parser(SERVICE).parse_args())
    asyncio.run(run_service(settings, create_app(settings)))


if __name__ == "__main__":
    main()
