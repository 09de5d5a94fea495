"""The operator settings every decision reads, loaded one way by every process that decides or
checks decisions: the three reconcilers, and the command-executor and dashboard-poller, whose
admission re-runs the same pure builders on the API server's objects. Two processes that read
them differently would disagree on what a reconciler could have produced (a forged-looking Pod
refused, or a forged one admitted), so there is one flag set and one loader.

KubeRay reads these knobs with os.Getenv and --feature-gates / --batch-scheduler; the kustomize
install feeds the same ConfigMap keys and the `raybus-operator-env` ConfigMap (KubeRay's env
variables) to each of these Deployments.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from raybus.decisions.settings import DecisionSettings

__all__ = ["DecisionSettings", "add_decision_flags", "decision_settings"]


def add_decision_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feature-gates", default=os.environ.get("RAYBUS_FEATURE_GATES", ""),
                        help="KubeRay --feature-gates syntax, e.g. RayMultiHostIndexing=false")
    parser.add_argument("--batch-scheduler", default=os.environ.get("RAYBUS_BATCH_SCHEDULER", ""),
                        help="KubeRay's --batch-scheduler: volcano, yunikorn or scheduler-plugins")


def decision_settings(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> DecisionSettings:
    """The settings from add_decision_flags' flags and the process environment (KubeRay's knobs)."""
    return DecisionSettings.from_env(os.environ if env is None else env, feature_gates=args.feature_gates,
                                     batch_scheduler=args.batch_scheduler)
