"""A real Prometheus (Debian's, `make prometheus`) scraping the local stack as Kubernetes would:
each service process is a target labelled with the `namespace`, `pod`, `service`, `container` and
`job` that the monitoring overlay's ServiceMonitors give it (honor_labels, as there), and the
overlay's PrometheusRule loaded as its rules. `raybus up --prometheus` and the real-Prometheus
tests use it."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from raybus_sim.testing.servers import die_with_parent, free_port, stop_process

REPO = Path(__file__).resolve().parents[3]
MONITORING = REPO / "deploy" / "kustomize" / "overlays" / "monitoring"
PROMETHEUS_RULE = MONITORING / "prometheusrule.yaml"
NAMESPACE = "raybus-system"  # the install's namespace (deploy/kustomize/base)


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found on PATH: `make prometheus` installs Debian's prometheus package")
    return path


def write_rules(out: Path, rule: Path = PROMETHEUS_RULE) -> Path:
    """A PrometheusRule's spec is a Prometheus rules file (its `groups`)."""
    spec = yaml.safe_load(rule.read_text())["spec"]
    out.write_text(yaml.safe_dump(spec, sort_keys=False))
    return out


@dataclass(frozen=True)
class Target:
    address: str  # host:port of /metrics
    service: str  # the raybus service, e.g. "cluster-reconciler"
    pod: str

    def labels(self) -> dict[str, str]:
        """What a ServiceMonitor over the base's metrics Service puts on the target."""
        return {"namespace": NAMESPACE, "pod": self.pod, "container": self.service,
                "service": f"raybus-{self.service}-metrics", "job": f"raybus-{self.service}-metrics",
                "endpoint": "metrics"}


def stack_targets(procs: Iterable[Any]) -> list[Target]:
    """The service processes of a LocalStack (raybus_sim.devstack.stack.Proc) as targets."""
    out = []
    for proc in procs:
        if proc.metrics_port and len(proc.argv) > 2 and proc.argv[1] == "-m":
            out.append(Target(address=f"127.0.0.1:{proc.metrics_port}",
                              service=proc.argv[2].replace("_", "-"), pod=f"raybus-{proc.name}"))
    return out


@dataclass
class Prometheus:
    home: Path
    scrape_s: float = 15.0
    port: int = 0
    popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_targets(self, targets: Iterable[Target]) -> None:
        """Written atomically; Prometheus re-reads the file when it changes (file_sd)."""
        groups = [{"targets": [t.address], "labels": t.labels()} for t in targets]
        tmp = self.home / "targets.json.tmp"
        tmp.write_text(json.dumps(groups))
        tmp.replace(self.home / "targets.json")

    def start(self, targets: Iterable[Target], *, rules: Path | None = PROMETHEUS_RULE,
              timeout_s: float = 60.0) -> Prometheus:
        self.home.mkdir(parents=True, exist_ok=True)
        self.set_targets(targets)
        interval = f"{int(self.scrape_s * 1000)}ms"
        config: dict[str, Any] = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval,
                       "scrape_timeout": f"{int(min(self.scrape_s, 10.0) * 1000)}ms"},
            "scrape_configs": [{"job_name": "raybus", "honor_labels": True,
                                "file_sd_configs": [{"files": [str(self.home / "targets.json")],
                                                     "refresh_interval": "5s"}]}]}
        if rules is not None:
            config["rule_files"] = [str(write_rules(self.home / "raybus-rules.yaml", rules))]
        (self.home / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = self.port or free_port()
        with (self.home / "prometheus.log").open("ab") as log:
            self.popen = subprocess.Popen(
                [binary("prometheus"), f"--config.file={self.home / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.home / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                 "--storage.tsdb.retention.time=1d"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=die_with_parent())  # noqa: PLW1509 - as servers.py
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"prometheus exited ({self.popen.returncode}); see {self.home / 'prometheus.log'}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready after {timeout_s}s; see {self.home / 'prometheus.log'}")

    def stop(self) -> None:
        if self.popen is not None:
            stop_process(self.popen)

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's series (a vector; a scalar or string result counts as one)."""
        data = self.api("query", query=expr)
        result = data["result"]
        return result if data["resultType"] in ("vector", "matrix") else [{"metric": {}, "value": result}]

    def label_values(self, label: str, match: str | None = None) -> list[str]:
        """Grafana's label_values(match, label)."""
        params = {"match[]": match} if match else {}
        return sorted(self.api(f"label/{label}/values", **params))

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])
