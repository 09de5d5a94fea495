"""Tear the node down by PID and leave nothing behind: no process, mount, iptables rule or bridge.

Order: the controllers stop first (nothing re-creates Pods), every Pod is deleted and the kubelet
removes its containers and network (CNI DEL: veths, IP leases, masquerade rules); then the node's
processes stop, in reverse order of start. What a crash could leave is removed directly: tasks and
shims of this containerd (found by its socket in their command line), mounts under the run folder,
kube-proxy's chains (`kube-proxy --cleanup`), the kubelet's KUBE-* chains, CNI chains of this
network, the bridge; the sysctls get their values from before the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tests.node.node import BRIDGE, CNI_NETWORK, RUN, log, realnode_binary, run

if TYPE_CHECKING:
    from tests.node.node import Node

STOP_ORDER = ("kube-scheduler", "kube-controller-manager", "kubelet", "kube-proxy", "containerd",
              "kube-apiserver", "etcd")


def _kill_pid(pid: int, timeout: float = 15.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _pid_alive(pid: int, name: str) -> bool:
    """The PID still runs the program we started (not a reused PID)."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False
    return Path(cmd).name == name


def _delete_pods(node: Node) -> None:
    node.kubectl("delete", "pods", "--all", "-A", "--grace-period=0", "--force", "--wait=false",
                 check=False, timeout=60)

    def no_sandboxes() -> bool:
        out = node.ctr("containers", "ls", "-q", check=False).stdout.decode().split()
        return not out
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not no_sandboxes():
        time.sleep(1)


def _shims(socket: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if argv and argv[0].endswith(b"containerd-shim-runc-v2") and socket.encode() in argv:
                pids.append(int(entry.name))
    return pids


def _remove_containers(socket: str) -> None:
    ctr = ["ctr", "--address", socket, "-n", "k8s.io"]
    tasks = subprocess.run([*ctr, "tasks", "ls", "-q"], check=False, capture_output=True, text=True).stdout.split()
    for task in tasks:
        subprocess.run([*ctr, "tasks", "kill", "-s", "SIGKILL", task], check=False, capture_output=True)
        subprocess.run([*ctr, "tasks", "delete", "-f", task], check=False, capture_output=True)
    for container in subprocess.run([*ctr, "containers", "ls", "-q"], check=False, capture_output=True, text=True).stdout.split():
        subprocess.run([*ctr, "containers", "delete", container], check=False, capture_output=True)


def _unmount_under(root: Path) -> None:
    for _ in range(3):
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        mine = sorted({m.replace("\\040", " ") for m in mounts if m.startswith(str(root) + "/")},
                      key=len, reverse=True)
        if not mine:
            return
        for mount in mine:
            subprocess.run(["umount", "-l", mount], check=False, capture_output=True)


def _iptables_cleanup() -> None:
    subprocess.run([str(realnode_binary("kube-proxy")), "--cleanup"], check=False, capture_output=True)
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            _chains_cleanup(tool, table)


def _chains_cleanup(tool: str, table: str) -> None:
    save = subprocess.run([f"{tool}-save", "-t", table], check=False, capture_output=True, text=True).stdout
    # CNI rules of this network (the bridge plugin's masquerade), by the network name in their comment.
    for line in save.splitlines():
        if line.startswith("-A ") and CNI_NETWORK in line:
            subprocess.run([tool, "-t", table, *shlex.split(line.replace("-A ", "-D ", 1))], check=False, capture_output=True)
    save = subprocess.run([f"{tool}-save", "-t", table], check=False, capture_output=True, text=True).stdout
    rules = [line for line in save.splitlines() if line.startswith("-A ")]
    for chain in [line[1:].split()[0] for line in save.splitlines() if line.startswith(":")]:
        own_rules = [r for r in rules if r.split()[1] == chain]
        # KUBE-*: what `kube-proxy --cleanup` leaves (the kubelet's canary and hint chains); CNI-*:
        # this network's per-Pod masquerade chains, empty once their rules are gone.
        if chain.startswith("KUBE-") or (chain.startswith("CNI-") and not own_rules):
            for rule in rules:
                if f"-j {chain}" in rule:
                    subprocess.run([tool, "-t", table, *shlex.split(rule.replace("-A ", "-D ", 1))], check=False, capture_output=True)
            subprocess.run([tool, "-t", table, "-F", chain], check=False, capture_output=True)
            subprocess.run([tool, "-t", table, "-X", chain], check=False, capture_output=True)


def _finish(root: Path, pids: dict[str, int], socket: str, sysctl: dict[str, str]) -> None:
    for name in STOP_ORDER:
        pid = pids.get(name)
        if pid is not None and _pid_alive(pid, "containerd" if name == "containerd" else name):
            if name == "containerd":
                _remove_containers(socket)
            _kill_pid(pid)
    for pid in _shims(socket):
        _kill_pid(pid, timeout=5)
    _unmount_under(root)
    _iptables_cleanup()
    if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        run("ip", "link", "del", BRIDGE, check=False)
    for key, value in sysctl.items():
        with contextlib.suppress(OSError):
            (Path("/proc/sys") / key).write_text(value)
    # pv: the hostPath volumes' data (a next install starts with empty claims, as on a new cluster).
    for sub in ("containerd", "kubelet", "etcd", "cni-ipam", "pv"):
        shutil.rmtree(root / sub, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (root / "state.json").unlink()


def teardown(node: Node) -> None:
    started = time.monotonic()
    for name in ("kube-scheduler", "kube-controller-manager"):
        node.stop_proc(name)
    if "kubelet" in node.procs and node.procs["kubelet"].poll() is None:
        with contextlib.suppress(Exception):
            _delete_pods(node)
    pids = {name: proc.pid for name, proc in node.procs.items()}
    for name in STOP_ORDER:
        if name == "containerd" and name in node.procs:
            _remove_containers(str(node.containerd_socket))
        node.stop_proc(name)
    _finish(node.root, pids, str(node.containerd_socket), node.sysctl_before)
    if node.lock_fd >= 0:
        os.close(node.lock_fd)
    log(f"torn down ({time.monotonic() - started:.0f} s)")


def teardown_state(root: Path = RUN) -> None:
    """From <root>/state.json: a run that died without tearing down."""
    path = root / "state.json"
    state = json.loads(path.read_text()) if path.exists() else {}
    _finish(root, state.get("pids", {}), state.get("containerd_socket", ""), state.get("sysctl", {}))


def leftovers() -> list[str]:
    """What a torn-down node must not have left: the checks' last assertion."""
    found = []
    if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        found.append(f"bridge {BRIDGE}")
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            save = subprocess.run([f"{tool}-save", "-t", table], check=False, capture_output=True, text=True).stdout
            found += [f"{tool} {table}: {line}" for line in save.splitlines()
                      if ("KUBE-" in line or CNI_NETWORK in line) and not line.startswith("#")]
    found += [f"mount {line.split()[1]}" for line in Path("/proc/self/mounts").read_text().splitlines()
              if line.split()[1].startswith(str(RUN) + "/")]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if str(RUN).encode() in (entry / "cmdline").read_bytes():
                    found.append(f"process {entry.name}: {(entry / 'cmdline').read_bytes()[:120]!r}")
    return found
