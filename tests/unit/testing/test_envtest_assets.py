"""How the envtest binaries are found or provided (raybus_sim.testing.envtest_assets): KUBEBUILDER_ASSETS
must be complete, ../shared/envtest is checked against its sha256 values, and with neither that
folder nor a reachable download it is an error that says so, never a skip."""

from __future__ import annotations

import hashlib
import lzma
from pathlib import Path

import pytest

from raybus_sim.testing import envtest_assets as assets
from raybus_sim.testing.servers import free_port


def _exe(path: Path, content: bytes = b"#!/bin/sh\n") -> Path:
    path.write_bytes(content)
    path.chmod(0o755)
    return path


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache and shared folder of the test's own; downloads go to a closed loopback port."""
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setattr(assets, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(assets, "SHARED_ENVTEST", tmp_path / "shared-envtest")
    closed = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setattr(assets, "ENVTEST_URL", f"{closed}/envtest.tar.gz")
    monkeypatch.setattr(assets, "KCM_URL", f"{closed}/kube-controller-manager")
    return tmp_path


def test_kubebuilder_assets_must_hold_all_three(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _exe(tmp_path / "etcd")
    _exe(tmp_path / "kube-apiserver")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    with pytest.raises(assets.AssetsUnavailable, match="lacks kube-controller-manager"):
        assets.ensure_assets()
    _exe(tmp_path / "kube-controller-manager")
    assert assets.ensure_assets() == tmp_path


def test_no_shared_folder_and_no_download_is_an_error(isolated: Path) -> None:
    with pytest.raises(assets.AssetsUnavailable) as err:
        assets.ensure_assets()
    message = str(err.value)
    assert "shared-envtest does not exist" in message and "download of Kubernetes v1.36.2" in message
    assert "KUBEBUILDER_ASSETS" in message


def test_shared_binaries_are_unpacked_and_checked(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = isolated / "shared-envtest"
    shared.mkdir()
    binaries = {name: f"{name} binary".encode() for name in assets.SHARED_SHA256}
    for name, data in binaries.items():
        (shared / f"{name}.xz").write_bytes(lzma.compress(data))
    # The real sha256 values do not match these stand-ins: refused, and nothing half-installed.
    with pytest.raises(assets.AssetsUnavailable, match="sha256"):
        assets.ensure_assets()
    assert not (isolated / "cache" / "kube-apiserver").exists()
    monkeypatch.setattr(assets, "SHARED_SHA256",
                        {name: hashlib.sha256(data).hexdigest() for name, data in binaries.items()})
    folder = assets.ensure_assets()
    assert folder == isolated / "cache"
    assert (folder / "kube-apiserver").read_bytes() == binaries["kube-apiserver"]
    assert (folder / "etcd").resolve().name == "etcd" and (folder / "etcd").stat().st_size > 1_000_000
    # A second call trusts the verified cache; a changed binary is provisioned again.
    (folder / "kube-apiserver").write_bytes(b"tampered")
    assert assets.ensure_assets() == folder
    assert (folder / "kube-apiserver").read_bytes() == binaries["kube-apiserver"]
