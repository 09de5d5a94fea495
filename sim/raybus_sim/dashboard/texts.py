"""Message strings and error bodies copied from a real Ray 2.60 dashboard.

Every constant names the capture in /work/shared/ray-dashboard it comes from. Tracebacks are
shortened in the middle but keep the first line and the final exception line, which is the part
a client can match on (e.g. "already exists", "non-terminal state").
"""

from __future__ import annotations

RAY_VERSION = "2.60.0"
RAY_COMMIT = "b7f4259e944bf6959f721b106adc366ddfa0c356"  # 00_dashboard_version
NODE_IP = "192.0.2.2"  # README §2: every node IP Ray reports is the host IP
AGENT_PORT = 52365

# JobDetails.message per status (README §3 "message strings", 11_*, 31_*, 35_*).
MSG_PENDING = "Job has not started yet."
MSG_PENDING_RESOURCES = (
    "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom resources)"
    " to become available. It may be waiting for the runtime environment to be set up."
)  # 31_joblong_get_status_PENDING: shown when entrypoint_num_cpus/... were requested
MSG_RUNNING = "Job is currently running."
MSG_SUCCEEDED = "Job finished successfully."
MSG_STOPPED = "Job was intentionally stopped."
MSG_FAILED_PREFIX = "Job entrypoint command failed with exit code {code}, last available logs (truncated to 20,000 chars):\n"  # 21_jobfail_get_final


def ghost_message(submission_id: str, pid: int) -> str:
    """39b_joblong_GET_ghost_after_delete_FAILED_SUPERVISOR_DIED."""
    return (
        "Job supervisor actor died: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: JobSupervisor\n\tactor_id: 76f2170599fd1f86fbd99d4802000000\n"
        f"\tpid: {pid}\n\tname: _ray_internal_job_actor_{submission_id}\n"
        f"\tnamespace: SUPERVISOR_ACTOR_RAY_NAMESPACE\n\tip: {NODE_IP}\n"
        "The actor is dead because its worker process has died. Worker exit type: INTENDED_USER_EXIT "
        "Worker exit detail: Worker exits by an user request. Worker exits with an exit code 0. "
        "exit_actor() is called."
    )


GHOST_ENTRYPOINT = "Entrypoint not found."  # 39b_*

_HEAD = "Traceback (most recent call last):\n"
_JOB_HEAD = '  File "/opt/rayenv/lib/python3.11/site-packages/ray/dashboard/modules/job/job_head.py"'


def job_not_found(job_id: str) -> str:
    return f"Job {job_id} does not exist"  # 40_err_GET_unknown_job (404 text/plain)


def duplicate_submission(submission_id: str) -> str:
    """41_err_POST_duplicate_submission_id: the agent's 400 wrapped into a 500 by the head."""
    return (
        f"{_HEAD}{_JOB_HEAD}, line 419, in submit_job\n"
        "    resp = await job_agent_client.submit_job_internal(submit_request)\n"
        f"{_JOB_HEAD}, line 134, in _raise_error\n"
        '    raise RuntimeError(f"Request failed with status code {status}: {error_text}.")\n'
        f"RuntimeError: Request failed with status code 400: {_HEAD}"
        '  File "/opt/rayenv/lib/python3.11/site-packages/ray/dashboard/modules/job/job_manager.py",'
        " line 553, in submit_job\n    raise ValueError(\n"
        f"ValueError: Job with submission_id {submission_id} already exists. "
        "Please use a different submission_id.\n.\n"
    )


def delete_non_terminal(submission_id: str, status: str) -> str:
    """33_joblong_DELETE_while_running / 81_jobpend_DELETE_while_PENDING (500 text/plain)."""
    return (
        f"{_HEAD}{_JOB_HEAD}, line 500, in delete_job\n"
        "    resp = await job_agent_client.delete_job_internal(job.submission_id)\n"
        f"{_JOB_HEAD}, line 134, in _raise_error\n"
        '    raise RuntimeError(f"Request failed with status code {status}: {error_text}.")\n'
        f"RuntimeError: Request failed with status code 500: {_HEAD}"
        '  File "/opt/rayenv/lib/python3.11/site-packages/ray/dashboard/modules/job/job_manager.py",'
        " line 655, in delete_job\n    raise RuntimeError(\n"
        f"RuntimeError: Attempted to delete job '{submission_id}', but it is in a non-terminal state "
        f"{status}.\n.\n"
    )


_VALIDATE = (
    f"{_HEAD}"
    '  File "/opt/rayenv/lib/python3.11/site-packages/ray/dashboard/modules/job/utils.py", line 128,'
    " in parse_and_validate_request\n    return validate_request_type(json_data, request_type)\n"
    '  File "/opt/rayenv/lib/python3.11/site-packages/ray/dashboard/modules/job/common.py", line 445,'
    " in validate_request_type\n    return request_type(**json_data)\n"
)
MISSING_ENTRYPOINT = (
    _VALIDATE
    + "TypeError: JobSubmitRequest.__init__() missing 1 required positional argument: 'entrypoint'\n"
)  # 42_err_POST_missing_entrypoint (400)


def unknown_submit_field(name: str) -> str:
    return _VALIDATE + f"TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument '{name}'\n"


def submit_wrong_type(field: str, kind: str) -> str:
    return _VALIDATE + f"TypeError: {field} must be a {kind}, got <class 'str'>\n"  # 42_*_wrong_type


SERVER_TROUBLE = "500 Internal Server Error\n\nServer got itself in trouble"  # 42_err_POST_malformed_json
NOT_FOUND = "404: Not Found"  # 00_dashboard_healthz
TAIL_NOT_SUBMISSION = "Can only get logs of submission type jobs"  # job_head.py tail_job_logs: 400


def browser_rejected(method: str) -> str:
    return f"'{method}' method not allowed for browser traffic."  # 184_*, 183_* (405)


def bad_api_type(value: str) -> str:
    return f"Invalid 'api_type' value: '{value}'. Must be one of: imperative, declarative"  # 112_*


def serve_put_bad_json(error: str) -> str:
    """180_serve_err_PUT_empty_body / malformed_json (500): ends with the JSONDecodeError text."""
    return (
        f"{_HEAD}"
        '  File "/opt/rayenv/lib/python3.11/site-packages/ray/dashboard/modules/serve/serve_head.py",'
        " line 163, in put_all_applications\n    await req.json()\n"
        f"json.decoder.JSONDecodeError: {error}\n"
    )


_PYD_HINT = "    For further information visit https://errors.pydantic.dev/2.14/v/{kind}"


def serve_validation(errors: list[tuple[str, str, str]]) -> str:
    """Pydantic repr as in 181_serve_err_PUT_*: (location, message, "kind, input_value=...") triples."""
    noun = "error" if len(errors) == 1 else "errors"
    lines = [f"{len(errors)} validation {noun} for ServeDeploySchema"]
    for loc, msg, kind in errors:
        lines += [loc, f"  {msg} [type={kind}]", _PYD_HINT.format(kind=kind.split(",")[0])]
    return "\n".join(lines)


def import_failed(app: str, import_path: str, *, missing: str | None = None) -> str:
    """161_serve_v5_*: DEPLOY_FAILED message for an app whose import fails. `missing`: the module
    a ModuleNotFoundError names (README §8: any unimportable module), else an AttributeError."""
    module, _, attr = import_path.replace(":", ".").rpartition(".")
    if missing is None and module.startswith("nonexistent"):
        missing = module
    last = (
        f"ModuleNotFoundError: No module named '{missing}'"
        if missing is not None
        else f"AttributeError: module '{module}' has no attribute '{attr}'"
    )
    return (
        f"Deploying app '{app}' failed with exception:\n{_HEAD}"
        '  File "/opt/rayenv/lib/python3.11/site-packages/ray/serve/_private/application_state.py",'
        f" line 926, in _reconcile_build_app_task\n{last}\n"
    )


ROUTE_TABLE_NOT_POPULATED = "Route table is not populated yet."  # README §8


def ctor_failed_app(deployments: list[str]) -> str:
    return f"Failed to update the deployments {deployments!r}."  # 161_serve_v5_poll_final app-badctor


CTOR_FAILED_DEPLOYMENT = (
    "The deployment failed to start 3 times in a row. This may be due to a problem with its constructor "
    "or initial health check failing. See controller logs for details. Error:\n"
    "ray::ServeReplica:{app}:{dep}.initialize_and_get_metadata()\nRuntimeError: constructor failed"
)


def unhealthy_app(deployments: list[str]) -> str:
    return f"The deployments {deployments!r} are UNHEALTHY."  # README §4 v8


def working_dir_plain_path(path: str) -> str:
    """90_wd_a_plain_path_PUT (400, pydantic)."""
    return serve_validation(
        [
            (
                "applications.0.runtime_env",
                (
                    "Value error, runtime_envs in the Serve config support only remote URIs in working_dir and "
                    'py_modules, or "local://" URIs for directories that already exist on every node. Got error '
                    f"when parsing URI: Expected URI but received path {path}"
                ),
                "value_error",
            )
        ]
    )


def working_dir_not_archive(uri: str) -> str:
    """90_wd_b_file_uri_dir_PUT (400 from ServeController.apply_config)."""
    return (
        "ray::ServeController.apply_config() (pid=7540, ip=192.0.2.2)\n"
        '  File "/opt/rayenv/lib/python3.11/site-packages/ray/_common/runtime_env_package.py", line 100,'
        " in validate_package_extension\n    raise ValueError(\n"
        f"ValueError: Only .zip, .tar.gz, .tgz, .tar.xz files are supported for working_dir URIs; got {uri}."
    )
