"""`python -m job_reconciler`: flags/env -> settings -> run until SIGTERM."""

from __future__ import annotations

from job_reconciler.app import create_app
from raybus.runtime.decision_settings import add_decision_flags, decision_settings
from raybus.runtime.service import common_parser, common_settings, serve

SERVICE = "job-reconciler"


def main() -> None:
    parser = common_parser(SERVICE)
    add_decision_flags(parser)
    args = parser.parse_args()
    settings = common_settings(SERVICE, args)
    # KubeRay's RayJob controller reads its knobs (RAYJOB_DEPLOYMENT_STATUS_TRANSITION_GRACE_PERIOD_SECONDS,
    # RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS, DELETE_RAYJOB_CR_AFTER_JOB_FINISHES, ...) from the operator's
    # environment with os.Getenv; we read them once, here at the edge, and pass them into pure code.
    serve(settings, create_app(settings, decision_settings(args).job), needs=("nats", "redis"))


if __name__ == "__main__":
    main()
