"""Bad input to the `raybus` CLI: one clear line per problem on stderr, exit code 1, no traceback.

Each row runs the real entry point (`raybus.cli.main`) in process: an exception escaping it would
be the traceback a user sees, and fails the row.
"""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from raybus.cli import main
from raybus_sim.testing.servers import free_port

CLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: demo
spec:
  rayVersion: '2.52.0'
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.52.0
  workerGroupSpecs:
  - groupName: small
    replicas: 1
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.52.0
"""


def _with(old: str, new: str) -> str:
    assert old in CLUSTER
    return CLUSTER.replace(old, new, 1)


BAD_RENDER = [
    # (case, file contents or None for no file, the lines expected on stderr after "raybus render: ")
    ("missing file", None, ["{f}: no such file"]),
    ("YAML syntax", _with("    template:\n      spec:", "     template:\n      spec:"),
     ["{f}:9:6: YAML error: expected <block end>, but found '<block mapping start>'"]),
    ("a string for an integer", _with("replicas: 1", 'replicas: "three"'),
     [('{f}:16: RayCluster "demo": spec.workerGroupSpecs[0].replicas: Invalid value: "string": '
      'spec.workerGroupSpecs[0].replicas in body must be of type integer: "string"')]),
    ("an object for a map of strings", _with("    rayStartParams: {}\n    template", "    rayStartParams: 5\n    template"),
     [('{f}:8: RayCluster "demo": spec.headGroupSpec.rayStartParams: Invalid value: "integer": '
      'spec.headGroupSpec.rayStartParams in body must be of type object: "integer"')]),
    ("an unknown Ray field", _with("rayVersion:", "rayVersoin:"),
     ['{f}:6: RayCluster "demo": strict decoding error: unknown field "spec.rayVersoin"']),
    ("an unknown pod template field", _with("          image: rayproject/ray:2.52.0\n  worker",
                                            "          imagePullPolicyy: Always\n  worker"),
     [('{f}:13: RayCluster "demo": strict decoding error: unknown field '
      '"spec.headGroupSpec.template.spec.containers[0].imagePullPolicyy"')]),
    ("an unknown metadata field", _with("  name: demo", "  name: demo\n  lables: {a: b}"),
     ['{f}:5: RayCluster "demo": strict decoding error: unknown field "metadata.lables"']),
    ("two unknown fields, one line each", _with("rayVersion:", "rayVersoin:").replace("groupName", "grupName"),
     ['{f}:6: RayCluster "demo": strict decoding error: unknown field "spec.rayVersoin"',
      '{f}:15: RayCluster "demo": strict decoding error: unknown field "spec.workerGroupSpecs[0].grupName"']),
    ("no Ray object", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
     ["{f}: no RayCluster, RayJob or RayService in it"]),
]


@pytest.mark.parametrize(("case", "text", "expected"), BAD_RENDER, ids=[row[0] for row in BAD_RENDER])
def test_render_explains_bad_input(case: str, text: str | None, expected: list[str], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "manifest.yaml"
    if text is not None:
        path.write_text(text)
    assert main(["render", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"raybus render: {line.format(f=path)}" for line in expected]
    assert captured.out == ""


def test_render_of_a_directory_and_a_bad_feature_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"raybus render: {tmp_path}: is a directory, not a manifest file\n"
    path = tmp_path / "ok.yaml"
    path.write_text(CLUSTER)
    assert main(["render", "--feature-gates", "NoSuchGate=true", str(path)]) == 1
    assert capsys.readouterr().err == "raybus render: --feature-gates: unrecognized feature gate: 'NoSuchGate=true'\n"


def test_the_good_manifest_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The table's base manifest is valid: each row fails on its one change alone."""
    path = tmp_path / "ok.yaml"
    path.write_text(CLUSTER)
    assert main(["render", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "kind: Pod" in captured.out


BAD_TAP = [
    (["tap", "bogus"], ("raybus tap: unknown filter 'bogus': give a subject pattern starting with 'raybus.' "
                       "or one of cmd, dash, dlq, obj, outcome, status, trigger")),
    (["tap", "raybus.cmd..x"], "raybus tap: 'raybus.cmd..x' is not a subject pattern: empty token or space"),
    (["tap", "raybus.>.x"], ("raybus tap: 'raybus.>.x' is not a subject pattern: '*' stands for a whole "
                            "token and '>' only for the last")),
    (["tap", "obj", "po*d"], ("raybus tap: 'raybus.obj.po*d.>' is not a subject pattern: '*' stands for a "
                             "whole token and '>' only for the last")),
]


@pytest.mark.parametrize(("argv", "expected"), BAD_TAP, ids=[" ".join(row[0]) for row in BAD_TAP])
def test_tap_refuses_a_bad_filter_before_connecting(argv: list[str], expected: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # A port nothing listens on: were the filter judged after connecting, the message would differ.
    assert main([*argv, "--nats-url", f"nats://127.0.0.1:{free_port()}"]) == 1
    assert capsys.readouterr().err == expected + "\n"


def test_tap_says_when_nats_does_not_answer(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # nothing listens there
    assert main(["tap", "--nats-url", f"nats://127.0.0.1:{port}", "--timeout", "30"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"raybus tap: cannot reach NATS at nats://127.0.0.1:{port}: ")
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"raybus {version('raybus')}\n"
