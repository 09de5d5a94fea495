"""The submitter command, template and Job (KubeRay's common/job_test.go and
rayjob_controller_unit_test.go TestGetSubmitterTemplate / createNewK8sJob)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybus.api.raycluster import RayClusterSpec
from raybus.api.rayjob import RayJob
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.job.gofmt import go_float32_f, go_json, go_quote, ray_version_at_least_2_6, yaml_to_json
from raybus.decisions.job.submitter import (
    SubmitterError,
    build_job_submit_command,
    submitter_job,
    submitter_template,
)
from tests.unit.decisions.job.fixtures import make_job

ENTRY = "echo no quote 'single quote' \"double quote\""
ADDR = "http://127.0.0.1:8265"


def python_health(url: str) -> str:
    """utils.BasePythonHealthCommand (v1.7) with RayDashboardGCSHealthCheckTimeoutSeconds."""
    return ('python -c "import urllib.request; r=urllib.request.urlopen(\'' + url + '\', timeout=10); '
            'exit(0 if b\'success\' in r.read() else 1)"')


def wait_loop(health_url: str, address: str = ADDR) -> list[str]:
    """The GCS health wait every mode starts with (job_test.go's expected prefix)."""
    return ["until", python_health(health_url), ">/dev/null", "2>&1", ";",
            "do", "echo", go_quote(f"Waiting for Ray Dashboard GCS to become healthy at {address} ..."), ";",
            "sleep", "2", ";", "done", ";"]


def template_job(**spec: object) -> RayJob:
    """rayJobTemplate() of job_test.go."""
    return make_job(runtimeEnvYAML="test: test", metadata={"testKey": "testValue"},
                    rayClusterSpec={"rayVersion": "2.6.0", "headGroupSpec": {"template": {"spec": {"containers": [
                        {"name": "ray-head", "image": "rayproject/ray:x",
                         "ports": [{"name": "dashboard", "containerPort": 8265}]}]}}}},
                    entrypoint=ENTRY, entrypointNumCpus=1, entrypointNumGpus=0.5,
                    entrypointResources='{"Custom_1": 1, "Custom_2": 5.5}', **spec)


TAIL = ["--runtime-env-json", go_quote('{"test":"test"}'), "--metadata-json", go_quote('{"testKey":"testValue"}'),
        "--submission-id", "testJobId", "--entrypoint-num-cpus", "1.000000", "--entrypoint-num-gpus", "0.500000",
        "--entrypoint-resources", go_quote('{"Custom_1": 1, "Custom_2": 5.5}'), "--", ENTRY, ";"]


def test_k8s_job_mode_command_is_idempotent_submit_then_follow() -> None:
    cmd = build_job_submit_command(template_job(), mode="K8sJobMode", job_id="testJobId", dashboard_url=ADDR)
    assert cmd == [*wait_loop(f"{ADDR}/api/gcs_healthz"), "if", "!", "ray", "job", "status", "--address", ADDR, "testJobId", ">/dev/null", "2>&1", ";", "then",
                   "ray", "job", "submit", "--address", ADDR, "--no-wait", *TAIL,
                   "fi", ";", "ray", "job", "logs", "--address", ADDR, "--follow", "testJobId"]


def test_k8s_job_mode_prefixes_http() -> None:
    cmd = build_job_submit_command(template_job(), mode="K8sJobMode", job_id="j", dashboard_url="svc.ns:8265")
    assert cmd[:14] == wait_loop("http://svc.ns:8265/api/gcs_healthz", "http://svc.ns:8265")
    assert cmd[14 + 6] == "http://svc.ns:8265"


def test_sidecar_mode_waits_for_gcs_health_and_submits_on_localhost_without_guard() -> None:
    cmd = build_job_submit_command(template_job(), mode="SidecarMode", job_id="testJobId", dashboard_url="")
    # TestBuildJobSubmitCommandWithSidecarMode: the sidecar probes localhost, submits on 127.0.0.1.
    assert cmd == [*wait_loop("http://localhost:8265/api/gcs_healthz"), "ray", "job", "submit", "--address", ADDR,
                   *TAIL]


def test_sidecar_mode_uses_the_heads_dashboard_port() -> None:
    job = make_job(submissionMode="SidecarMode", rayClusterSpec={"headGroupSpec": {"template": {"spec": {
        "containers": [{"name": "ray-head", "image": "i", "ports": [{"name": "dashboard", "containerPort": 9999}]}]}}}})
    cmd = build_job_submit_command(job, mode="SidecarMode", job_id="j", dashboard_url="")
    assert cmd[:14] == wait_loop("http://localhost:9999/api/gcs_healthz", "http://127.0.0.1:9999")


def test_sidecar_submitter_restart_gate_adds_the_guard() -> None:
    cmd = build_job_submit_command(template_job(), mode="SidecarMode", job_id="testJobId", dashboard_url="",
                                   sidecar_submitter_restart=True)
    assert cmd[14:26] == ["if", "!", "ray", "job", "status", "--address", ADDR, "testJobId", ">/dev/null", "2>&1",
                          ";", "then"]
    assert "--no-wait" in cmd and cmd[-2:] == ["--follow", "testJobId"]


def test_yaml_runtime_env_becomes_sorted_json() -> None:
    job = make_job(runtimeEnvYAML='working_dir: "https://x/a.zip"\npip: ["python-multipart==0.0.6"]\n')
    cmd = build_job_submit_command(job, mode="K8sJobMode", job_id="j", dashboard_url=ADDR)
    raw = cmd[cmd.index("--runtime-env-json") + 1]
    assert raw == go_quote('{"pip":["python-multipart==0.0.6"],"working_dir":"https://x/a.zip"}')


def test_metadata_needs_ray_2_6() -> None:
    job = make_job(metadata={"k": "v"}, rayClusterSpec={"rayVersion": "2.5.0", "headGroupSpec": {}})
    with pytest.raises(SubmitterError, match="at least 2.6.0"):
        build_job_submit_command(job, mode="K8sJobMode", job_id="j", dashboard_url=ADDR)
    unset = make_job(metadata={"k": "v"}, rayClusterSpec={"headGroupSpec": {}})
    assert "--metadata-json" in build_job_submit_command(unset, mode="K8sJobMode", job_id="j", dashboard_url=ADDR)


def test_unsupported_mode_is_an_error() -> None:
    with pytest.raises(SubmitterError, match="unsupported submission mode"):
        build_job_submit_command(template_job(), mode="HTTPMode", job_id="j", dashboard_url=ADDR)


def test_entrypoint_is_trimmed_and_optional_flags_omitted() -> None:
    job = make_job(entrypoint="  python x.py \n")
    cmd = build_job_submit_command(job, mode="K8sJobMode", job_id="", dashboard_url=ADDR)
    assert "--submission-id" not in cmd and "--entrypoint-num-cpus" not in cmd and "--runtime-env-json" not in cmd
    assert cmd[cmd.index("--") + 1] == "python x.py"


def _spec() -> RayClusterSpec:
    return RayClusterSpec.model_validate({"headGroupSpec": {"template": {"spec": {"containers": [
        {"name": "ray-head", "image": "rayproject/ray:custom-version"}]}}}})


def test_default_submitter_template_uses_head_image_bash_ce_and_env() -> None:
    job = template_job()
    tpl = submitter_template(job, job_id="test-job-id", dashboard_url="test-url", cluster_name="c",
                             cluster_spec=_spec(), settings=OperatorSettings())
    container = tpl["spec"]["containers"][0]
    assert tpl["spec"]["restartPolicy"] == "Never"
    assert container["name"] == "ray-job-submitter" and container["image"] == "rayproject/ray:custom-version"
    assert container["command"] == ["/bin/bash", "-ce", "--"]
    assert container["args"][0].startswith(" ".join(wait_loop("http://test-url/api/gcs_healthz", "http://test-url")))
    assert "; if ! ray job status --address http://test-url test-job-id >/dev/null 2>&1 ; " \
           "then ray job submit --address http://test-url --no-wait " in container["args"][0]
    # kuberay#4638: the originated-from labels, so the cluster's NetworkPolicy admits the submitter.
    assert tpl["metadata"]["labels"] == {"ray.io/originated-from-cr-name": job.name,
                                         "ray.io/originated-from-crd": "RayJob",
                                         "app.kubernetes.io/created-by": "kuberay-operator"}
    assert container["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"},
                                      "requests": {"cpu": "500m", "memory": "200Mi"}}
    assert container["env"] == [{"name": "PYTHONUNBUFFERED", "value": "1"},
                                {"name": "RAY_DASHBOARD_ADDRESS", "value": "test-url"},
                                {"name": "RAY_JOB_SUBMISSION_ID", "value": "test-job-id"}]


def test_login_shell_setting() -> None:
    tpl = submitter_template(template_job(), job_id="j", dashboard_url="u", cluster_name="c", cluster_spec=_spec(),
                             settings=OperatorSettings(enable_login_shell=True))
    # GetContainerCommand([]string{"e"}) under ENABLE_LOGIN_SHELL: options first, then l (TestGetContainerCommand).
    assert tpl["spec"]["containers"][0]["command"] == ["/bin/bash", "-cel", "--"]


def test_user_submitter_template_keeps_its_command() -> None:
    job = template_job(submitterPodTemplate={"spec": {"restartPolicy": "Never", "containers": [
        {"name": "mine", "image": "img", "command": ["user-command"], "env": [{"name": "A", "value": "1"}]}]}})
    tpl = submitter_template(job, job_id="j", dashboard_url="u", cluster_name="c", cluster_spec=_spec(),
                             settings=OperatorSettings())
    container = tpl["spec"]["containers"][0]
    assert container["command"] == ["user-command"] and "args" not in container
    assert [e["name"] for e in container["env"]] == ["A", "PYTHONUNBUFFERED", "RAY_DASHBOARD_ADDRESS",
                                                     "RAY_JOB_SUBMISSION_ID"]
    assert job.spec.submitter_pod_template["spec"]["containers"][0].get("env") == [{"name": "A", "value": "1"}]


def test_submitter_job_manifest() -> None:
    job = make_job(submitterConfig={"backoffLimit": 5})
    manifest = submitter_job(job, {"spec": {}})
    assert manifest["metadata"]["name"] == "rj" and manifest["spec"]["backoffLimit"] == 5
    assert manifest["metadata"]["labels"] == {"ray.io/originated-from-cr-name": "rj",
                                              "ray.io/originated-from-crd": "RayJob",
                                              "app.kubernetes.io/created-by": "kuberay-operator"}
    assert manifest["metadata"]["ownerReferences"] == [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj",
                                                        "uid": "uid-rj", "controller": True,
                                                        "blockOwnerDeletion": True}]
    assert submitter_job(make_job(), {"spec": {}})["spec"]["backoffLimit"] == 2


def test_auth_token_env_for_the_submitter() -> None:
    spec = RayClusterSpec.model_validate({"authOptions": {"mode": "token"}, "headGroupSpec": {"template": {"spec": {
        "containers": [{"name": "ray-head", "image": "i"}]}}}})
    tpl = submitter_template(make_job(), job_id="j", dashboard_url="u", cluster_name="c", cluster_spec=spec,
                             settings=OperatorSettings())
    names = [e["name"] for e in tpl["spec"]["containers"][0]["env"]]
    assert names[-2:] == ["RAY_AUTH_MODE", "RAY_AUTH_TOKEN"]


# --- Go formatting ---
@given(st.text())
def test_go_quote_round_trips_through_json_for_ascii_escapes(text: str) -> None:
    quoted = go_quote(text)
    assert quoted.startswith('"') and quoted.endswith('"')
    if all(ch.isprintable() or ch in "\n\t\r" for ch in text):
        assert json.loads(quoted) == text


def test_go_formats() -> None:
    assert go_quote('a"b\\c\n\x01é') == '"a\\"b\\\\c\\n\\x01é"'
    assert go_float32_f(0.1) == "0.100000" and go_float32_f(2) == "2.000000"
    assert go_json({"b": 1.0, "a": "<&>"}) == '{"a":"\\u003c\\u0026\\u003e","b":1}'
    assert yaml_to_json("test: test") == '{"test":"test"}'
    assert ray_version_at_least_2_6("2.52") and ray_version_at_least_2_6("v2.6.0")
    assert not ray_version_at_least_2_6("2.5.9") and not ray_version_at_least_2_6("2.6.0-rc1")
    with pytest.raises(ValueError):
        ray_version_at_least_2_6("latest")


def test_user_template_labels_are_kept_and_originated_from_added() -> None:
    job = template_job(submitterPodTemplate={"metadata": {"labels": {"team": "a", "ray.io/originated-from-crd": "x"}},
                                             "spec": {"containers": [{"name": "mine", "image": "img"}]}})
    tpl = submitter_template(job, job_id="j", dashboard_url="u", cluster_name="c", cluster_spec=_spec(),
                             settings=OperatorSettings())
    assert tpl["metadata"]["labels"] == {"team": "a", "ray.io/originated-from-cr-name": job.name,
                                         "ray.io/originated-from-crd": "RayJob",
                                         "app.kubernetes.io/created-by": "kuberay-operator"}


@pytest.mark.parametrize(("gate", "restart_policy"), [(False, None), (True, "OnFailure")])
def test_sidecar_container_restart_policy_follows_the_gate(gate: bool, restart_policy: str | None) -> None:
    """TestGetSubmitterContainerWithFeatureGate."""
    from raybus.api.settings import FeatureGates
    from raybus.decisions.job.submitter import submitter_container

    settings = OperatorSettings(feature_gates=FeatureGates(sidecar_submitter_restart=gate))
    job = template_job(submissionMode="SidecarMode")
    container = submitter_container(job, job_id="j", dashboard_url="u", cluster_name="c",
                                    cluster_spec=job.spec.ray_cluster_spec, settings=settings)
    assert container.get("restartPolicy") == restart_policy
    assert ("ray job status" in container["args"][0]) is gate


@pytest.mark.parametrize(("name", "restarts", "exit_code", "term", "last_term", "expected"), [
    # TestCheckIsRestartCountExceeded (limit 2)
    ("restart count below limit of 2", 1, 1, True, True, False),
    ("restart count at limit of 2", 2, 1, True, True, True),
    ("successful exit should not trigger failure", 3, 0, True, True, False),
    ("never terminated before", 5, 1, True, False, False),
    ("running again after restarts", 2, None, False, True, True),
])
def test_restart_count_exceeded(name: str, restarts: int, exit_code: int | None, term: bool, last_term: bool,
                                expected: bool) -> None:
    from raybus.decisions.job.checks import restart_count_exceeded

    status: dict[str, object] = {"name": "ray-job-submitter", "restartCount": restarts}
    if term:
        status["state"] = {"terminated": {"exitCode": exit_code}}
    if last_term:
        status["lastState"] = {"terminated": {"exitCode": 1}}
    assert restart_count_exceeded(status, 2) is expected, name
