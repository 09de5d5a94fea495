"""The `bash -ce` subset the simulated kubelet runs submitter scripts with (raybus_sim.kubelet.shell)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybus.decisions.cluster.autoscaler_container import AUTOSCALER_START_CMD
from raybus_sim.kubelet import shell
from raybus_sim.kubelet.submitter import program_of

K8S = ("if ! ray job status --address http://h:8265 id1 >/dev/null 2>&1 ; then ray job submit --address "
       "http://h:8265 --no-wait --runtime-env-json \"{\\\"pip\\\":[\\\"a\\\"]}\" --submission-id id1 -- python -c \""
       "\nimport ray\nray.init()\n\" ; fi ; ray job logs --address http://h:8265 --follow id1")
SIDECAR = ('until wget -T 10 -q -O- http://localhost:8265/api/gcs_healthz | grep success >/dev/null 2>&1 ; '
           'do echo "Waiting..." ; sleep 2 ; done ; ray job submit --address http://127.0.0.1:8265 -- sleep 1 ;')


def run(script: str, codes: dict[str, list[int]], env: dict[str, str] | None = None) -> tuple[int, list[list[str]]]:
    """Run `script`; each simple command named in `codes` returns its next code (default 0)."""
    calls: list[list[str]] = []

    async def simple(words: list[str]) -> int:
        calls.append(words)
        name = " ".join(words[:3]) if words[0] == "ray" else words[0]
        queue = codes.get(name)
        return queue.pop(0) if queue else 0

    code = asyncio.run(shell.Runner(simple).run(shell.parse(script, env)))
    return code, calls


@pytest.mark.parametrize(("status", "submits"), [(1, True), (0, False)])
def test_kuberay_guarded_submission(status: int, submits: bool) -> None:
    code, calls = run(K8S, {"ray job status": [status]})
    assert code == 0
    assert [c[:3] for c in calls] == [["ray", "job", "status"], *([["ray", "job", "submit"]] if submits else []),
                                      ["ray", "job", "logs"]]
    if submits:
        submit = calls[1]
        assert submit[submit.index("--runtime-env-json") + 1] == '{"pip":["a"]}'
        assert submit[submit.index("--") + 1:] == ["python", "-c", "\nimport ray\nray.init()\n"]
    assert all(">" not in w and w != "2" for c in calls for w in c)  # redirections are gone


def test_a_failed_submit_ends_the_script_before_following() -> None:
    code, calls = run(K8S, {"ray job status": [1], "ray job submit": [1]})
    assert code == 1 and [c[2] for c in calls] == ["status", "submit"]


def test_sidecar_waits_until_the_gcs_is_healthy() -> None:
    code, calls = run(SIDECAR, {"wget": [4, 4, 0], "ray job submit": [1]})
    assert code == 1
    assert [c[0] for c in calls] == ["wget", "grep", "echo", "sleep", "wget", "grep", "echo", "sleep", "wget", "grep",
                                     "ray"]


@pytest.mark.parametrize(("script", "codes", "expected", "ran"), [
    ("false ; echo x", {"false": [1]}, 1, ["false"]),
    ("! false ; echo x", {"false": [1]}, 0, ["false", "echo"]),
    ("false || echo x", {"false": [1]}, 0, ["false", "echo"]),
    ("false && echo x ; echo y", {"false": [1]}, 0, ["false", "echo"]),
    ("echo a && false", {"false": [1]}, 1, ["echo", "false"]),
    ("if false ; then echo a ; elif true ; then echo b ; else echo c ; fi", {"false": [1]}, 0,
     ["false", "true", "echo"]),
    ("echo a ; exit 3 ; echo b", {}, 3, ["echo"]),
    ("while false ; do echo a ; done", {"false": [1]}, 0, ["false"]),
])
def test_errexit_and_control_flow(script: str, codes: dict[str, list[int]], expected: int, ran: list[str]) -> None:
    code, calls = run(script, codes)
    assert code == expected and [c[0] for c in calls] == ran


def test_env_references_expand_like_bash() -> None:
    _, calls = run("ray job submit --address=http://$RAY_DASHBOARD_ADDRESS --submission-id=${ID} -- echo $UNSET hi",
                   {}, env={"RAY_DASHBOARD_ADDRESS": "svc:8265", "ID": "j1"})
    assert calls == [["ray", "job", "submit", "--address=http://svc:8265", "--submission-id=j1", "--", "echo", "hi"]]


@pytest.mark.parametrize("script", ["if true ; then echo", "until true ; echo ; done", "echo 'unbalanced", "; fi"])
def test_unsupported_or_broken_scripts_are_refused(script: str) -> None:
    with pytest.raises(shell.ShellError):
        shell.parse(script)


@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=8))
def test_a_sequence_stops_at_its_first_failure(codes: list[int]) -> None:
    script = " ; ".join(f"cmd{i}" for i in range(len(codes)))
    code, calls = run(script, {f"cmd{i}": [c] for i, c in enumerate(codes)})
    first_failure = next((i for i, c in enumerate(codes) if c), None)
    assert len(calls) == (len(codes) if first_failure is None else first_failure + 1)
    assert code == (0 if first_failure is None else codes[first_failure])


@pytest.mark.parametrize(("container", "is_program"), [
    ({"command": ["/bin/bash", "-c", "--"], "args": [K8S]}, True),
    ({"command": ["ray", "job", "submit", "--address", "http://h:8265", "--", "sleep", "1"]}, True),
    # Long-running ray processes are not submitters: the autoscaler sidecar must keep running.
    ({"command": ["/bin/bash", "-lc", "--"], "args": [AUTOSCALER_START_CMD]}, False),
    ({"command": ["ray", "start", "--head", "--block"]}, False),
    ({"command": ["/bin/bash", "-c", "--"], "args": ["ulimit -n 65536; ray start --head --block"]}, False),
])
def test_only_ray_job_scripts_are_submitter_programs(container: dict[str, object], is_program: bool) -> None:
    assert (program_of(container) is not None) is is_program
