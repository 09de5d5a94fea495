"""One settings model per service (runtime.settings): flags generated from it, RAYBUS_* variables
(and the aliases deploy/ uses), KubeRay's own variable names, secrets redacted, one line on a bad
value; docs/configuration.md generated from the models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from raybus.runtime import settings as rs
from raybus.runtime.settings_reference import DECIDING, SERVICES, reference, settings_class

ROOT = Path(__file__).resolve().parents[3]


def test_configuration_reference_is_current() -> None:
    assert (ROOT / "docs/configuration.md").read_text() == reference(), (
        "regenerate: python -m raybus.runtime.settings_reference > docs/configuration.md")


def test_every_variable_deploy_sets_is_documented() -> None:
    doc = (ROOT / "docs/configuration.md").read_text()
    for name in ("RAYBUS_KUBE_API_QPS", "RAYBUS_EXECUTOR_CONCURRENCY", "RAYBUS_WATCH_NAMESPACE",
                 "RAYBUS_WEBHOOK_STRICTNESS", "RAYBUS_STREAM_REPLICAS", "RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS",
                 "ENABLE_ZERO_DOWNTIME", "RAYBUS_FEATURE_GATES"):
        assert f"`{name}`" in doc, name


@pytest.mark.parametrize("service", list(SERVICES))
def test_each_binary_shows_only_its_own_flags(service: str) -> None:
    flags = {flag for _, flag, _ in rs.flags(settings_class(service))}
    reconciler = service.endswith("reconciler")
    assert ("--redis-url" in flags) == reconciler
    assert ("--debounce-s" in flags) == reconciler
    assert ("--feature-gates" in flags) == (service in DECIDING or service == "webhook")
    assert ("--kube-api-qps" in flags) == (service in ("watcher", "command-executor"))
    assert ("--nats-url" in flags) == (service != "webhook")
    assert "--admission" not in flags and "--service" not in flags


def test_flags_beat_env_and_aliases_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    executor = settings_class("command-executor")
    monkeypatch.setenv("RAYBUS_KUBE_API_QPS", "7")
    monkeypatch.setenv("RAYBUS_EXECUTOR_CONCURRENCY", "3")
    monkeypatch.setenv("RAYBUS_NATS_URL", "nats://from-env:4222")
    got = rs.load(executor, "command-executor", ["--nats-url", "nats://from-flag:4222"])
    assert (got.kube_qps, got.concurrency, got.nats_url) == (7.0, 3, "nats://from-flag:4222")  # type: ignore[attr-defined]
    assert got.replica_id  # a generated one when none is set


def test_kuberay_variables_reach_the_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS", "42")
    monkeypatch.setenv("ENABLE_ZERO_DOWNTIME", "false")
    monkeypatch.setenv("ENABLE_RANDOM_POD_DELETE", "true")
    settings = rs.load(rs.ReconcilerSettings, "job-reconciler", ["--feature-gates", "RayJobDeletionPolicy=true"])
    decisions = settings.decisions()
    assert decisions.job.status_check_timeout_seconds == 42
    assert decisions.service.enable_zero_downtime is False
    assert decisions.operator.enable_random_pod_delete is True
    assert decisions.job.deletion_policy_gate is True
    executor = rs.load(settings_class("command-executor"), "command-executor", [])
    assert executor.decision.job.status_check_timeout_seconds == 42  # type: ignore[attr-defined]


def test_secret_from_a_file_and_redacted(tmp_path: Path) -> None:
    poller = settings_class("dashboard-poller")
    (tmp_path / "raybus_ray_events_key").write_text("s3cret")
    got = poller(service="dashboard-poller", _secrets_dir=tmp_path)  # type: ignore[call-arg]
    assert got.ray_events_key == "s3cret"  # type: ignore[attr-defined]
    assert rs.effective(got)["ray_events_key"] == rs.REDACTED
    assert "s3cret" not in repr(got)


def _main(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", **(env or {})}, check=False)


def test_a_bad_value_is_one_line() -> None:
    out = _main("watcher", env={"RAYBUS_KUBE_API_QPS": "fast"})
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--kube-api-qps / RAYBUS_KUBE_API_QPS" in out.stderr.strip().splitlines()[-1]
    out = _main("cluster_reconciler", "--feature-gates", "NoSuchGate=true")
    assert out.returncode == 2 and "Traceback" not in out.stderr and "NoSuchGate" in out.stderr


def test_raybus_config_redacts() -> None:
    out = subprocess.run([sys.executable, "-m", "raybus.cli", "config", "dashboard-poller"], capture_output=True,
                         text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "RAYBUS_RAY_EVENTS_KEY": "hunter2",
                                                     "RAYBUS_SLOW_INTERVAL_S": "12"}, check=False)
    assert out.returncode == 0, out.stderr
    assert "hunter2" not in out.stdout and '"slow_interval_s": 12.0' in out.stdout


def test_only_the_settings_module_reads_the_environment() -> None:
    found = subprocess.run(["grep", "-rln", "--include=*.py", "os.environ", "shared/raybus", "services"],
                           cwd=ROOT, capture_output=True, text=True, check=False).stdout.split()
    assert found == ["shared/raybus/runtime/settings.py"], found
