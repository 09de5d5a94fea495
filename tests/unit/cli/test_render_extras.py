"""`raybus render` of manifests using metadata.generateName, and of clusters whose first step is the
GCS FT finalizer (issue 13 items 2 and 6)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from raybus.cli.render import render
from tests.conftest import SAMPLES

GENERATE_NAME_SAMPLES = ["ray-job.kueue-toy-sample.yaml",
                         "pytorch-text-classifier__ray-job.pytorch-distributed-training.yaml"]


@pytest.mark.parametrize("sample", GENERATE_NAME_SAMPLES)
def test_generate_name_renders_under_a_placeholder_name(sample: str) -> None:
    text = (SAMPLES / sample).read_text()
    objects, problems = render(text)
    assert problems == []
    prefix = "rayjob-sample-" if "kueue" in sample else "pytorch-text-classifier-"
    heads = [o for o in objects if o["kind"] == "Pod" and o["metadata"]["labels"]["ray.io/node-type"] == "head"]
    assert len(heads) == 1
    cluster = heads[0]["metadata"]["labels"]["ray.io/cluster"]
    # <generateName><5 chars> for the RayJob, then the RayCluster's own -<5 chars>.
    assert cluster.startswith(prefix) and len(cluster) == len(prefix) + 5 + 1 + 5
    assert render(text) == (objects, problems)  # the placeholder is stable


def test_cli_exit_code_zero_for_generate_name() -> None:
    done = subprocess.run([sys.executable, "-m", "raybus.cli", "render",
                           str(SAMPLES / "ray-job.kueue-toy-sample.yaml")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_gcs_ft_sample_renders_past_the_finalizer() -> None:
    objects, problems = render((SAMPLES / "ray-cluster.persistent-redis.yaml").read_text())
    assert problems == []
    assert [o["metadata"]["labels"]["ray.io/node-type"] for o in objects if o["kind"] == "Pod"].count("head") == 1


def test_auth_sample_renders_the_token_secret_without_a_value() -> None:
    objects, _ = render((SAMPLES / "ray-cluster.auth.yaml").read_text())
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    assert secret["metadata"]["name"] == "ray-cluster-with-auth"
    assert "data" not in secret and "stringData" not in secret
