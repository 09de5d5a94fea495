"""The wheel, as `pip install .` (every image) installs it: built from the source tree, installed
with requirements-runtime.lock into a fresh venv, outside the repository, every module imported
and every service's --help run. A pyproject that lists top-level packages only ships a wheel of
`__init__.py` files, and every service then dies with ModuleNotFoundError."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from raybus_sim.devstack.stack import SERVICES
from tests.runtime_lock import render

ROOT = Path(__file__).resolve().parents[2]
# `raybus up`'s services and the optional validating webhook (deploy/kustomize/components/webhook)
DEPLOYABLES = [*SERVICES, "webhook"]
PACKAGES = {"raybus": ROOT / "shared" / "raybus",
            **{s: ROOT / "services" / s.replace("_", "-") / s for s in DEPLOYABLES}}

# In the fresh venv: import every module of every package (a __main__ would run its program:
# the --help test below runs those); print the failures.
IMPORT_ALL = """
import importlib, pkgutil, sys
failed, count = [], 0
for top in sys.argv[1:]:
    pkg = importlib.import_module(top)
    assert "site-packages" in pkg.__file__, pkg.__file__
    names = [top] + [m.name for m in pkgutil.walk_packages(pkg.__path__, top + ".")]
    for name in names:
        if name.endswith(".__main__"):
            continue
        try:
            importlib.import_module(name)
            count += 1
        except Exception as exc:
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(f"imported {count}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def _run(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{argv}: {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # setuptools copies into ROOT/build/lib and never removes what is there: a module moved out
    # of the tree since an earlier build would still ship (a fresh clone has no build/).
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)], cwd=out)
    [whl] = out.glob("raybus-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    where = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", str(where / "v")], cwd=where)
    py = where / "v" / "bin" / "python"
    # The runtime lock alone (no dev tools): what the runtime image installs.
    _run([str(py), "-m", "pip", "install", "-q", "--no-compile", "-r",
          str(ROOT / "requirements-runtime.lock")], cwd=where)
    _run([str(py), "-m", "pip", "install", "-q", "--no-compile", "--no-deps", str(wheel)], cwd=where)
    _run([str(py), "-m", "pip", "check"], cwd=where)
    return where / "v"


def test_wheel_holds_every_module_and_no_simulator(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for top, src in PACKAGES.items():
        sources = {f"{top}/{p.relative_to(src).as_posix()}" for p in src.rglob("*.py")
                   if "__pycache__" not in p.parts}
        assert sources, top
        missing = sorted(sources - names)
        assert not missing, f"{top}: {len(missing)} modules missing from the wheel, e.g. {missing[:5]}"
    assert not [n for n in names if n.startswith("raybus_sim/")], "the runtime wheel carries the simulator"
    # The operator only: no envtest downloader, no local stack (`raybus up` is raybus-sim's).
    assert not [n for n in names if n.startswith(("raybus/testing/", "raybus/cli/up", "raybus/cli/stack"))]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    for service in DEPLOYABLES:
        assert f"raybus-{service.replace('_', '-')} = {service}.__main__:main" in scripts


def test_every_module_imports_from_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    proc = _run([str(venv / "bin" / "python"), "-c", IMPORT_ALL, *PACKAGES], cwd=tmp_path)
    count = int(proc.stdout.split()[1])
    assert count == sum(1 for src in PACKAGES.values() for p in src.rglob("*.py")
                        if p.name != "__main__.py" and "__pycache__" not in p.parts)


@pytest.mark.parametrize("service", DEPLOYABLES)
def test_every_service_answers_help(venv: Path, tmp_path: Path, service: str) -> None:
    # The entry point the images run (`python -m <service>`, what `raybus up` runs, is the same
    # main: the entry_points check above ties them).
    argv = [str(venv / "bin" / f"raybus-{service.replace('_', '-')}"), "--help"]
    out = _run(argv, cwd=tmp_path, timeout=120).stdout
    # Each binary shows its own flags only: the webhook talks to no bus.
    assert out.startswith("usage:") and "--log-level" in out, out
    assert ("--nats-url" in out) == (service != "webhook"), out
    assert ("--redis-url" in out) == service.endswith("reconciler"), out


def test_runtime_lock_is_current() -> None:
    """requirements-runtime.lock is requirements.lock cut to the runtime closure (`make lock`)."""
    assert (ROOT / "requirements-runtime.lock").read_text() == render()
