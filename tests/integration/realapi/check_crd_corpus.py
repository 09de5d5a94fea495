"""`make crd-corpus`: every corpus case through `kubectl apply --dry-run=server --validate=strict`
itself on raybus's CRDs, against KubeRay v1.7.0's recorded verdicts (tests/crds/). `make test`
sends kubectl's requests directly (test_crd_verdicts.py): kubectl spends about 0.15 s per object
on the group's OpenAPI document, so this run takes about 1.5 minutes."""

from __future__ import annotations

from pathlib import Path

import pytest

from raybus_sim.testing.envtest import ControlPlane
from tests.crds.verdicts import run_kubectl
from tests.integration.realapi.test_crd_verdicts import CORPUS, EXPECTED

pytestmark = pytest.mark.integration


def test_every_case_through_kubectl(ray_crds: ControlPlane, namespace: str, tmp_path: Path) -> None:
    got = run_kubectl(list(enumerate(CORPUS)), ray_crds.admin_kubeconfig, namespace, tmp_path)
    assert [f"{i}: KubeRay {want}, raybus {got.get(i)}" for i, want in EXPECTED.items() if got.get(i) != want] == []
