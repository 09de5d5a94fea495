"""Table-driven RayService validation against KubeRay v1.7 ValidateRayServiceSpec wording."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.api import RayService
from raybus.api.settings import FeatureGates
from raybus.api.validation import validate_rayservice
from tests.unit.api.builders import Doc, Mutation, mutated, rayservice

INVALID = "The RayService spec is invalid: "


def spec(**fields: Any) -> Mutation:
    return lambda doc: doc["spec"].update(fields)


def annotate(value: str) -> Mutation:
    return lambda doc: doc["metadata"].update(annotations={"ray.io/initializing-timeout": value})


def incremental(options: dict[str, Any] | None, *, autoscale: bool = True) -> Mutation:
    def apply(doc: Doc) -> None:
        doc["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = autoscale
        strategy: dict[str, Any] = {"type": "NewClusterWithIncrementalUpgrade"}
        if options is not None:
            strategy["clusterUpgradeOptions"] = options
        doc["spec"]["upgradeStrategy"] = strategy

    return apply


GOOD_OPTIONS = {"stepSizePercent": 10, "intervalSeconds": 30, "gatewayClassName": "istio"}

CASES: list[tuple[str, Mutation, str]] = [
    ("name too long", lambda d: d["metadata"].update(name="s" * 48),
     "The RayService metadata is invalid: RayService name should be no more than 47 characters"),
    ("name not dns1035", lambda d: d["metadata"].update(name="-svc"),
     "The RayService metadata is invalid: RayService name should be a valid DNS1035 label"),
    ("timeout zero duration", annotate("0s"),
     ("The RayService metadata is invalid: RayService annotations is invalid: annotation ray.io/initializing-timeout "
     "must be a positive duration, got: 0s")),
    ("timeout zero seconds", annotate("-3"), "must be a positive integer (seconds), got: -3"),
    ("timeout garbage", annotate("soon"),
     ("annotation ray.io/initializing-timeout has invalid format: soon. Expected Go duration format (e.g., '5m', "
     "'1h') or positive integer seconds")),
    ("k8s token auth", lambda d: d["spec"]["rayClusterConfig"].update(
        rayVersion="2.55.0", authOptions={"mode": "token", "enableK8sTokenAuth": True}),
     INVALID + "K8s token auth mode is currently not supported for RayService"),
    ("cluster spec problem", lambda d: d["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"].update(
        containers=[]), INVALID + "headGroupSpec should have at least one container"),
    ("head service name", lambda d: d["spec"]["rayClusterConfig"]["headGroupSpec"].update(
        headService={"metadata": {"name": "fixed"}}),
     INVALID + "spec.rayClusterConfig.headGroupSpec.headService.metadata.name should not be set"),
    ("upgrade type", spec(upgradeStrategy={"type": "BlueGreen"}),
     INVALID + "Spec.UpgradeStrategy.Type value BlueGreen is invalid, valid options are "
     "NewClusterWithIncrementalUpgrade, NewCluster, or None"),
    ("negative deletion delay", spec(rayClusterDeletionDelaySeconds=-1),
     INVALID + "Spec.RayClusterDeletionDelaySeconds should be a non-negative integer, got -1"),
    ("incremental without autoscaler", incremental(GOOD_OPTIONS, autoscale=False),
     INVALID + "Ray Autoscaler is required for NewClusterWithIncrementalUpgrade"),
    ("incremental without options", incremental(None),
     INVALID + "ClusterUpgradeOptions are required for NewClusterWithIncrementalUpgrade"),
    ("max surge range", incremental({**GOOD_OPTIONS, "maxSurgePercent": 150}), "maxSurgePercent must be between 0 and 100"),
    ("step missing", incremental({"intervalSeconds": 30, "gatewayClassName": "g"}),
     "stepSizePercent must be between 0 and 100"),
    ("step above surge", incremental({**GOOD_OPTIONS, "maxSurgePercent": 5}),
     "stepSizePercent must be less than or equal to maxSurgePercent"),
    ("interval zero", incremental({**GOOD_OPTIONS, "intervalSeconds": 0}), "intervalSeconds must be greater than 0"),
    ("gateway class missing", incremental({"stepSizePercent": 10, "intervalSeconds": 30}),
     "gatewayClassName is required for NewClusterWithIncrementalUpgrade"),
    ("serveConfigV2 not yaml", spec(serveConfigV2="applications: [\n"), INVALID + "serveConfigV2 is not valid YAML"),
    ("serveConfigV2 not a mapping", spec(serveConfigV2="just a string"),
     INVALID + "serveConfigV2 must be a YAML mapping"),
    ("managedBy other", spec(managedBy="x"), "the managedBy field value must be either"),
]


@pytest.mark.parametrize(("mutation", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(mutation: Mutation, expected: str) -> None:
    assert validate_rayservice(RayService.model_validate(rayservice())) == []
    problems = validate_rayservice(RayService.model_validate(mutated(rayservice(), mutation)))
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("value", ["30", "5m", "1h30m", "1.5h", "300ms"])
def test_initializing_timeout_accepts_go_durations_and_seconds(value: str) -> None:
    assert validate_rayservice(RayService.model_validate(mutated(rayservice(), annotate(value)))) == []


def test_incremental_upgrade_checks_follow_the_gate() -> None:
    svc = RayService.model_validate(mutated(rayservice(), incremental(None)))
    assert validate_rayservice(svc) != []
    # With the gate off KubeRay does not treat the strategy as incremental, so options are not checked.
    assert validate_rayservice(svc, settings=FeatureGates(ray_service_incremental_upgrade=False)) == []
    good = RayService.model_validate(mutated(rayservice(), incremental(GOOD_OPTIONS)))
    assert validate_rayservice(good) == []
