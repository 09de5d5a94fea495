"""The submitter: KubeRay's ``common/job.go`` (BuildJobSubmitCommand, GetSubmitterTemplate,
GetDefaultSubmitterContainer) and ``rayjob_controller.go`` (configureSubmitterContainer,
getSubmitterTemplate, getSubmitterContainer, createNewK8sJob), as pure builders.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from raybus.api.predicates import as_dict, as_list, containers
from raybus.api.raycluster import RayClusterSpec
from raybus.api.rayjob import JobSubmissionMode, RayJob
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.pod_env import is_auth_enabled, set_container_token_auth_env_vars
from raybus.decisions.cluster.ray_start import container_command
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.job import constants as c
from raybus.decisions.job.gofmt import go_float32_f, go_json, go_quote, ray_version_at_least_2_6, yaml_to_json


class SubmitterError(Exception):
    """KubeRay's builders returned an error (the reconcile returns it: rate-limited requeue)."""


def owner_reference(job: RayJob) -> dict[str, Any]:
    """ctrl.SetControllerReference(rayJob, obj): the RayJob is the controller owner."""
    return {"apiVersion": k.RAY_API_VERSION, "kind": "RayJob", "name": job.name,
            "uid": job.metadata.uid or "", "controller": True, "blockOwnerDeletion": True}


def submission_mode(job: RayJob) -> str:
    return job.spec.submission_mode or JobSubmissionMode.K8S_JOB.value


def find_container_port(container: dict[str, Any], name: str, default: int) -> int:
    """utils.FindContainerPort."""
    for port in as_list(container.get("ports")):
        if as_dict(port).get("name") == name:
            return int(as_dict(port).get("containerPort") or 0)
    return default


def _metadata_json(job: RayJob) -> str:
    """getMetadataJSONForSubmitCommand: Ray >= 2.6.0 is required only when rayVersion is set."""
    spec = job.spec.ray_cluster_spec
    if spec is not None and spec.ray_version:
        try:
            ok = ray_version_at_least_2_6(spec.ray_version)
        except ValueError as exc:
            raise SubmitterError(f"failed to parse Ray version: {spec.ray_version}: {exc}") from exc
        if not ok:
            raise SubmitterError("the Ray version must be at least 2.6.0 to use the metadata field")
    return go_json(job.spec.metadata or {})


def build_job_submit_command(job: RayJob, *, mode: str, job_id: str, dashboard_url: str,
                             sidecar_submitter_restart: bool = False) -> list[str]:
    """common.BuildJobSubmitCommand.

    Every mode first waits until the dashboard's GCS is healthy (v1.7, kuberay#4468: Python's urllib,
    so a head image without wget does not wait forever), printing KubeRay's "Waiting for Ray
    Dashboard GCS to become healthy at <address> ..." every 2 s. K8sJobMode: the submitter Job may
    be retried (its backoffLimit), so submission is guarded with ``ray job status`` and done with
    ``--no-wait``, then ``ray job logs --follow`` waits for the end (kuberay#2154). SidecarMode: the
    container shares the head's network namespace, submits on 127.0.0.1 and waits (restartPolicy
    Never: no retry, so no guard - unless the SidecarSubmitterRestart gate lets the container
    restart).
    """
    if mode == JobSubmissionMode.SIDECAR:
        spec = job.spec.ray_cluster_spec
        head = (containers(spec.head_group_spec.template) or [{}])[0] if spec is not None else {}
        port = find_container_port(head, k.DASHBOARD_PORT_NAME, k.DEFAULT_DASHBOARD_PORT)
        address = f"http://127.0.0.1:{port}"
        # The sidecar shares the head's network namespace: probe localhost.
        health_url = f"http://localhost:{port}/{k.RAY_DASHBOARD_GCS_HEALTH_PATH}"
    elif mode == JobSubmissionMode.K8S_JOB:
        address = dashboard_url if dashboard_url.startswith("http://") else "http://" + dashboard_url
        health_url = f"{address}/{k.RAY_DASHBOARD_GCS_HEALTH_PATH}"
    else:
        raise SubmitterError(f"unsupported submission mode for job submit command: {mode}")

    health = k.BASE_PYTHON_HEALTH_COMMAND.format(url=health_url,
                                                 timeout=k.RAY_DASHBOARD_GCS_HEALTH_CHECK_TIMEOUT_SECONDS)
    cmd: list[str] = ["until", health, ">/dev/null", "2>&1", ";",
                      "do", "echo", go_quote(f"Waiting for Ray Dashboard GCS to become healthy at {address} ..."), ";",
                      "sleep", "2", ";", "done", ";"]
    guarded = mode == JobSubmissionMode.K8S_JOB or sidecar_submitter_restart
    if guarded:
        cmd += ["if", "!", "ray", "job", "status", "--address", address, job_id, ">/dev/null", "2>&1", ";", "then"]
    cmd += ["ray", "job", "submit", "--address", address]
    if guarded:
        cmd.append("--no-wait")
    if job.spec.runtime_env_yaml:
        try:
            runtime_env = yaml_to_json(job.spec.runtime_env_yaml)
        except yaml.YAMLError as exc:  # the user's YAML; KubeRay returns the error
            raise SubmitterError(str(exc)) from exc
        cmd += ["--runtime-env-json", go_quote(runtime_env)]
    if job.spec.metadata:
        cmd += ["--metadata-json", go_quote(_metadata_json(job))]
    if job_id:
        cmd += ["--submission-id", job_id]
    if (job.spec.entrypoint_num_cpus or 0) > 0:
        cmd += ["--entrypoint-num-cpus", go_float32_f(float(job.spec.entrypoint_num_cpus or 0))]
    if (job.spec.entrypoint_num_gpus or 0) > 0:
        cmd += ["--entrypoint-num-gpus", go_float32_f(float(job.spec.entrypoint_num_gpus or 0))]
    if job.spec.entrypoint_resources:
        cmd += ["--entrypoint-resources", go_quote(job.spec.entrypoint_resources)]
    # "--" separates the entrypoint from the Ray Job CLI's own arguments.
    cmd += ["--", (job.spec.entrypoint or "").strip(), ";"]
    if guarded:
        cmd += ["fi", ";", "ray", "job", "logs", "--address", address, "--follow", job_id]
    return cmd


def default_submitter_container(cluster_spec: RayClusterSpec) -> dict[str, Any]:
    """common.GetDefaultSubmitterContainer: the head's image (defensive against version skew)."""
    head = (containers(cluster_spec.head_group_spec.template) or [{}])[0]
    return {
        "name": c.SUBMITTER_CONTAINER_NAME,
        "image": head.get("image", ""),
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}},
    }


def configure_submitter_container(container: dict[str, Any], job: RayJob, *, mode: str, job_id: str,
                                  dashboard_url: str, cluster_name: str, cluster_spec: RayClusterSpec | None,
                                  settings: OperatorSettings) -> None:
    """configureSubmitterContainer (mutates ``container``)."""
    cmd = build_job_submit_command(job, mode=mode, job_id=job_id, dashboard_url=dashboard_url,
                                   sidecar_submitter_restart=settings.feature_gates.sidecar_submitter_restart)
    # K8sJobMode keeps a user's command; SidecarMode always uses the default one. Without bash's -e
    # the script would go on after a failing command.
    if not container.get("command") or mode == JobSubmissionMode.SIDECAR:
        container["command"] = container_command(login_shell=settings.enable_login_shell, additional_options="e")
        container["args"] = [" ".join(cmd)]
    env: list[Any] = list(as_list(container.get("env")))
    env.append({"name": c.PYTHON_UNBUFFERED_ENV_VAR_NAME, "value": "1"})
    # Users may reference these in their own submitter command (ray job submit --address=... ).
    env.append({"name": c.RAY_DASHBOARD_ADDRESS, "value": dashboard_url})
    env.append({"name": c.RAY_JOB_SUBMISSION_ID, "value": job_id})
    container["env"] = env
    if cluster_spec is not None and is_auth_enabled(cluster_spec.auth_options):
        set_container_token_auth_env_vars(container, cluster_name=cluster_name, auth=cluster_spec.auth_options)


def submitter_container(job: RayJob, *, job_id: str, dashboard_url: str, cluster_name: str,
                        cluster_spec: RayClusterSpec, settings: OperatorSettings) -> dict[str, Any]:
    """getSubmitterContainer (SidecarMode)."""
    container = default_submitter_container(cluster_spec)
    configure_submitter_container(container, job, mode=JobSubmissionMode.SIDECAR.value, job_id=job_id,
                                  dashboard_url=dashboard_url, cluster_name=cluster_name,
                                  cluster_spec=cluster_spec, settings=settings)
    if settings.feature_gates.sidecar_submitter_restart:
        # SidecarSubmitterRestart (alpha; needs Kubernetes' ContainerRestartRules): only this
        # container restarts on a non-zero exit (e.g. `ray job logs --follow` losing its WebSocket);
        # the restarted script sees the job in `ray job status` and re-attaches to its logs.
        container["restartPolicy"] = "OnFailure"
    return container


def submitter_template(job: RayJob, *, job_id: str, dashboard_url: str, cluster_name: str,
                       cluster_spec: RayClusterSpec, settings: OperatorSettings) -> dict[str, Any]:
    """getSubmitterTemplate: submitterPodTemplate (a copy) or the default one, first container configured."""
    if job.spec.submitter_pod_template is not None:
        template = copy.deepcopy(job.spec.submitter_pod_template)
    else:
        template = {"spec": {"containers": [default_submitter_container(cluster_spec)], "restartPolicy": "Never"}}
    pod_spec = template.get("spec") if isinstance(template.get("spec"), dict) else None
    found = pod_spec.get("containers") if pod_spec is not None else None
    if not isinstance(found, list) or not found or not isinstance(found[0], dict):
        raise SubmitterError("submitterPodTemplate has no containers")
    configure_submitter_container(found[0], job, mode=JobSubmissionMode.K8S_JOB.value, job_id=job_id,
                                  dashboard_url=dashboard_url, cluster_name=cluster_name,
                                  cluster_spec=cluster_spec, settings=settings)
    # v1.7 (kuberay#4638): the submitter Pod carries the originated-from labels, so the RayCluster's
    # NetworkPolicy (which admits them) lets it reach the dashboard.
    metadata = template.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    labels = dict(metadata.get("labels") or {})
    labels[k.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY] = job.name
    labels[k.RAY_ORIGINATED_FROM_CRD_LABEL_KEY] = k.RAY_JOB_CRD
    labels[k.KUBERNETES_CREATED_BY_LABEL_KEY] = k.COMPONENT_NAME
    metadata["labels"] = labels
    template["metadata"] = metadata
    return template


def submitter_job(job: RayJob, template: dict[str, Any]) -> dict[str, Any]:
    """createNewK8sJob: the batch/v1 Job named after the RayJob, owned by it.

    submitterConfig.backoffLimit defaults to 2 (not Kubernetes' 6): at most 3 submission attempts
    mitigate transient failures without wasting cycles on unrecoverable application errors. The
    created-by label is what KubeRay's (and raybus' watcher's) Job informer selects on.
    """
    config = job.spec.submitter_config
    backoff = config.backoff_limit if config is not None and config.backoff_limit is not None \
        else c.DEFAULT_SUBMITTER_BACKOFF_LIMIT
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": {
                k.RAY_ORIGINATED_FROM_CR_NAME_LABEL_KEY: job.name,
                k.RAY_ORIGINATED_FROM_CRD_LABEL_KEY: k.RAY_JOB_CRD,
                k.KUBERNETES_CREATED_BY_LABEL_KEY: k.COMPONENT_NAME,
            },
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {"backoffLimit": backoff, "template": template},
    }
