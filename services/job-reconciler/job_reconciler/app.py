"""job-reconciler: KubeRay's RayJob controller as a bus consumer.

Implemented so far: KubeRay's validation step (ValidationFailed status + Warning event, terminal).
The RayJob lifecycle (cluster creation, submission modes, deadlines, deletion rules) is not yet
implemented: valid RayJobs are logged and left untouched rather than half-handled.
"""

from __future__ import annotations

from raybus.api.rayjob import RayJob
from raybus.bus import subjects as s
from raybus.decisions.job.validation import rayjob_validation
from raybus.runtime.reconciler_app import ReconcilerApp
from raybus.runtime.service import CommonSettings
from raybus.runtime.validating import validating_reconcile


def create_app(settings: CommonSettings) -> ReconcilerApp:
    return ReconcilerApp(
        settings, controller=s.Controller.JOB, primary_kind=s.Kind.RAYJOB,
        kinds=[s.Kind.RAYJOB, s.Kind.RAYCLUSTER],
        make_reconcile=lambda ctx: validating_reconcile(ctx, kind=s.Kind.RAYJOB, model=RayJob,
                                                        decide=rayjob_validation))
