"""Table-driven RayJob / RayCronJob validation against KubeRay v1.7 ValidateRayJobSpec wording."""

from __future__ import annotations

from typing import Any

import pytest

from raybus.api import RayCronJob, RayJob
from raybus.api.settings import FeatureGates
from raybus.api.validation import validate_raycronjob, validate_rayjob
from tests.unit.api.builders import Doc, Mutation, mutated, rayjob

INVALID = "The RayJob spec is invalid: "


def spec(**fields: Any) -> Mutation:
    return lambda doc: doc["spec"].update(fields)


def without_cluster(**fields: Any) -> Mutation:
    def apply(doc: Doc) -> None:
        doc["spec"].pop("rayClusterSpec")
        doc["spec"].update(fields)

    return apply


def rules(*items: tuple[str, dict[str, Any]], **fields: Any) -> Mutation:
    return spec(deletionStrategy={"deletionRules": [{"policy": p, "condition": c} for p, c in items]}, **fields)


SELECTOR = {"ray.io/cluster": "existing"}

CASES: list[tuple[str, Mutation, str]] = [
    ("name too long", lambda d: d["metadata"].update(name="j" * 48),
     "The RayJob metadata is invalid: RayJob name should be no more than 47 characters"),
    ("name not dns1035", lambda d: d["metadata"].update(name="job_1"),
     "The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label"),
    ("suspend without shutdown", spec(suspend=True),
     INVALID + "a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended"),
    ("negative ttl", spec(ttlSecondsAfterFinished=-1, shutdownAfterJobFinishes=True),
     INVALID + "TTLSecondsAfterFinished must be a non-negative integer"),
    ("ttl without shutdown", spec(ttlSecondsAfterFinished=10),
     INVALID + "a RayJob with shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"),
    ("neither cluster spec nor selector", without_cluster(),
     INVALID + "one of RayClusterSpec or ClusterSelector must be set"),
    ("selector suspend", without_cluster(clusterSelector=SELECTOR, suspend=True, shutdownAfterJobFinishes=True),
     INVALID + "the ClusterSelector mode doesn't support the suspend operation"),
    ("selector without cluster name", without_cluster(clusterSelector={"other": "x"}),
     "cluster name in ClusterSelector should not be empty"),
    ("selector in sidecar mode", without_cluster(clusterSelector=SELECTOR, submissionMode="SidecarMode"),
     "ClusterSelector is not supported in SidecarMode"),
    ("selector with backoff", without_cluster(clusterSelector=SELECTOR, backoffLimit=2),
     INVALID + "BackoffLimit is incompatible with ClusterSelector mode"),
    ("interactive with backoff", spec(submissionMode="InteractiveMode", backoffLimit=1),
     INVALID + "BackoffLimit is incompatible with InteractiveMode"),
    ("sidecar with submitter template", spec(submissionMode="SidecarMode", submitterPodTemplate={"spec": {}}),
     "Currently, SidecarMode doesn't support SubmitterPodTemplate"),
    ("sidecar with submitter config", spec(submissionMode="SidecarMode", submitterConfig={"backoffLimit": 1}),
     "Currently, SidecarMode doesn't support SubmitterConfig"),
    ("sidecar head restartPolicy",
     lambda d: (d["spec"].update(submissionMode="SidecarMode"),
                d["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"].update(restartPolicy="Always")),
     "restartPolicy for head Pod should be Never or unset when using SidecarMode"),
    ("unknown submission mode", spec(submissionMode="CronMode"), 'spec.submissionMode: Unsupported value: "CronMode"'),
    ("k8s token auth", lambda d: d["spec"]["rayClusterSpec"].update(
        rayVersion="2.55.0", authOptions={"mode": "token", "enableK8sTokenAuth": True}),
     INVALID + "K8s token auth mode is currently not supported for RayJob"),
    ("embedded cluster spec problem", lambda d: d["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].update(minReplicas=9),
     INVALID + "worker group small has minReplicas 9 greater than maxReplicas 5"),
    ("runtimeEnvYAML not yaml", spec(runtimeEnvYAML="pip: [a, b"), "failed to unmarshal RuntimeEnvYAML: pip: [a, b"),
    ("runtimeEnvYAML not a map", spec(runtimeEnvYAML="- a\n- b\n"), "failed to unmarshal RuntimeEnvYAML"),
    ("activeDeadlineSeconds zero", spec(activeDeadlineSeconds=0),
     INVALID + "activeDeadlineSeconds must be a positive integer"),
    ("preRunningDeadlineSeconds zero", spec(preRunningDeadlineSeconds=0),
     INVALID + "preRunningDeadlineSeconds must be a positive integer"),
    ("negative backoff", spec(backoffLimit=-1), INVALID + "backoffLimit must be a positive integer"),
    ("managedBy other", spec(managedBy="someone"), "the managedBy field value must be either"),
    ("waiting status outside interactive", lambda d: d.update(status={"jobDeploymentStatus": "Waiting"}),
     "The RayJob status is invalid: JobDeploymentStatus cannot be `Waiting` when SubmissionMode is not InteractiveMode"),
    # deletionStrategy
    ("empty strategy", spec(deletionStrategy={}),
     INVALID + "DeletionStrategy requires either BOTH onSuccess and onFailure, OR the deletionRules field "
     "(cannot be empty)"),
    ("rules with shutdown", rules(("DeleteCluster", {"jobStatus": "FAILED"}), shutdownAfterJobFinishes=True),
     INVALID + "spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"),
    ("rules and legacy", spec(deletionStrategy={"onSuccess": {"policy": "DeleteCluster"},
                                                "deletionRules": [{"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED"}}]}),
     INVALID + "Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously"),
    ("legacy only onSuccess", spec(deletionStrategy={"onSuccess": {"policy": "DeleteCluster"}}),
     ("both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the legacy deletion "
     "policy fields of DeletionStrategy")),
    ("legacy unset policy", spec(deletionStrategy={"onSuccess": {}, "onFailure": {"policy": "DeleteNone"}}),
     "the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset when DeletionStrategy is enabled"),
    ("legacy selector DeleteCluster",
     without_cluster(clusterSelector=SELECTOR, deletionStrategy={"onSuccess": {"policy": "DeleteCluster"},
                                                                 "onFailure": {"policy": "DeleteNone"}}),
     "the ClusterSelector mode doesn't support DeletionStrategy=DeleteCluster on success"),
    ("legacy DeleteWorkers with autoscaling",
     lambda d: (d["spec"]["rayClusterSpec"].update(enableInTreeAutoscaling=True),
                d["spec"].update(deletionStrategy={"onSuccess": {"policy": "DeleteWorkers"},
                                                   "onFailure": {"policy": "DeleteCluster"}})),
     "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled"),
    ("legacy DeleteNone with shutdown",
     spec(shutdownAfterJobFinishes=True, deletionStrategy={"onSuccess": {"policy": "DeleteNone"},
                                                          "onFailure": {"policy": "DeleteCluster"}}),
     INVALID + "shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'"),
    ("rule with both statuses", rules(("DeleteSelf", {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed"})),
     "deletionRules[0]: cannot set both JobStatus and JobDeploymentStatus at the same time"),
    ("rule with no status", rules(("DeleteSelf", {"ttlSeconds": 5})),
     "deletionRules[0]: exactly one of JobStatus and JobDeploymentStatus must be set"),
    ("rule negative ttl", rules(("DeleteSelf", {"jobStatus": "FAILED", "ttlSeconds": -1})),
     "deletionRules[0]: TTLSeconds must be non-negative"),
    ("rule selector DeleteWorkers",
     without_cluster(clusterSelector=SELECTOR, deletionStrategy={"deletionRules": [
         {"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED"}}]}),
     "deletionRules[0]: DeletionPolicyType 'DeleteWorkers' not supported when ClusterSelector is set"),
    ("rule DeleteWorkers with autoscaling",
     lambda d: (d["spec"]["rayClusterSpec"].update(enableInTreeAutoscaling=True),
                d["spec"].update(deletionStrategy={"deletionRules": [
                    {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED"}}]})),
     "deletionRules[0]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled"),
    ("duplicate rule", rules(("DeleteSelf", {"jobStatus": "FAILED"}), ("DeleteSelf", {"jobStatus": "FAILED", "ttlSeconds": 9})),
     "deletionRules[1]: duplicate rule for DeletionPolicyType 'DeleteSelf' and JobStatus 'FAILED'"),
    ("ttl order", rules(("DeleteCluster", {"jobStatus": "SUCCEEDED", "ttlSeconds": 60}),
                        ("DeleteSelf", {"jobStatus": "SUCCEEDED", "ttlSeconds": 30})),
     "for JobStatus 'SUCCEEDED': DeleteSelf TTL (30) must be >= DeleteCluster TTL (60)"),
    ("deployment-status ttl order", rules(("DeleteWorkers", {"jobDeploymentStatus": "Failed", "ttlSeconds": 10}),
                                         ("DeleteCluster", {"jobDeploymentStatus": "Failed"})),
     "for JobDeploymentStatus 'Failed': DeleteCluster TTL (0) must be >= DeleteWorkers TTL (10)"),
    ("rule bad jobStatus", rules(("DeleteSelf", {"jobStatus": "RUNNING"})),
     'deletionRules[0]: condition.jobStatus: Unsupported value: "RUNNING"'),
]


@pytest.mark.parametrize(("mutation", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(mutation: Mutation, expected: str) -> None:
    assert validate_rayjob(RayJob.model_validate(rayjob())) == []
    problems = validate_rayjob(RayJob.model_validate(mutated(rayjob(), mutation)))
    assert any(expected in p for p in problems), problems


def test_valid_deletion_rules_and_selector_job_pass() -> None:
    ok = mutated(rayjob(), rules(("DeleteWorkers", {"jobStatus": "SUCCEEDED"}),
                                 ("DeleteCluster", {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}),
                                 ("DeleteSelf", {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}),
                                 ("DeleteSelf", {"jobDeploymentStatus": "Failed"})))
    assert validate_rayjob(RayJob.model_validate(ok)) == []
    selector = mutated(rayjob(), without_cluster(clusterSelector=SELECTOR))
    assert validate_rayjob(RayJob.model_validate(selector)) == []
    waiting = mutated(rayjob(), spec(submissionMode="InteractiveMode"))
    waiting["status"] = {"jobDeploymentStatus": "Waiting"}
    assert validate_rayjob(RayJob.model_validate(waiting)) == []


def test_deletion_strategy_needs_gate() -> None:
    job = RayJob.model_validate(mutated(rayjob(), rules(("DeleteSelf", {"jobStatus": "FAILED"}))))
    assert validate_rayjob(job) == []
    assert validate_rayjob(job, settings=FeatureGates(ray_job_deletion_policy=False)) == [
        "RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy"
    ]


def _cron(schedule: str, **spec_fields: Any) -> RayCronJob:
    return RayCronJob.model_validate(
        {"metadata": {"name": "nightly"}, "spec": {"schedule": schedule, "jobTemplate": rayjob()["spec"], **spec_fields}}
    )


@pytest.mark.parametrize("schedule", ["*/5 * * * *", "0 3 * * MON-FRI", "15,45 0-6/2 1 JAN,jul ?", "@daily",
                                      "@every 1h30m"])
def test_cron_valid_schedules(schedule: str) -> None:
    assert validate_raycronjob(_cron(schedule)) == []


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("* * * *", "invalid cron schedule: expected exactly 5 fields, found 4: [* * * *]"),
        ("60 * * * *", "invalid cron schedule: end of range (60) above maximum (59): 60"),
        ("* * 0 * *", "invalid cron schedule: beginning of range (0) below minimum (1): 0"),
        ("*/0 * * * *", "invalid cron schedule: step of range should be a positive number: */0"),
        ("5-1 * * * *", "invalid cron schedule: beginning of range (5) beyond end of range (1): 5-1"),
        ("@sometimes", "invalid cron schedule: unrecognized descriptor: @sometimes"),
        ("CRON_TZ=UTC * * * * *", "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"),
    ],
)
def test_cron_invalid_schedules(schedule: str, expected: str) -> None:
    assert validate_raycronjob(_cron(schedule)) == [expected]


def test_cron_time_zone_name_and_template() -> None:
    assert validate_raycronjob(_cron("* * * * *", timeZone="")) == [
        "timeZone must not be empty string, omit the field to use the local time zone of the KubeRay operator"
    ]
    long_name = _cron("* * * * *").model_copy(deep=True)
    long_name.metadata.name = "n" * 37
    assert validate_raycronjob(long_name) == ["RayCronJob name should be no more than 36 characters"]
    bad_template = _cron("* * * * *", jobTemplate={"entrypoint": "x"})
    assert validate_raycronjob(bad_template) == [
        "invalid RayJob template: " + INVALID + "one of RayClusterSpec or ClusterSelector must be set"
    ]
