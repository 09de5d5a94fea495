"""Simulated Ray Serve controller state behind `/api/serve/applications/` (README §4).

Like jobs, app states are derived from the clock at each GET. Behaviours reproduced:

* every PUT is declarative and replaces the whole app set; missing apps go DELETING then vanish
  (v6), DEPLOY_FAILED import-error apps vanish at once;
* a new/changed app is DEPLOYING (`deployments: {}`, `route_prefix: null`, topology null) for
  `deploy_s`, then RUNNING; there is no app-level UPDATING (an update shows DEPLOYING);
* unchanged apps may blip DEPLOYING for `unchanged_blip_s` right after a PUT (v2/v5/v8);
* import failures (any module the head cannot import, see imports.py; `*:no_such_attr`) and
  constructor failures (`*broken*`) end DEPLOY_FAILED with the captured messages (v5); the control
  API can plan either;
* updating a serving app to a broken import: DEPLOYING then DEPLOY_FAILED with deployments {},
  while the route stays and the old replicas keep answering (README §8);
* a fresh Serve whose route table was never populated (e.g. its only app failed at import)
  answers `/-/healthz` and `/-/routes` with 503 "Route table is not populated yet." (README §8);
* the control API can force UNHEALTHY (v8) or any status on a running app.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from raybus_sim.dashboard import imports, texts
from raybus_sim.dashboard import serve_shapes as shapes

APP_STATUSES = ("NOT_STARTED", "DEPLOYING", "DEPLOY_FAILED", "RUNNING", "UNHEALTHY", "DELETING")


class ServeRejected(Exception):
    """A PUT the real dashboard refuses: carries the status code and text/plain body."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


@dataclass(kw_only=True)
class AppPlan:
    deploy_s: float | None = None
    fail: str | None = None  # "import" | "ctor" | None
    deployments: list[str] | None = None  # names the user's code would define


@dataclass(kw_only=True)
class SimApp:
    name: str
    config: dict[str, Any]
    deployed_at: float
    ready_at: float
    fail: str | None
    served_before: bool = False  # an update of an app that was serving: keeps its route meanwhile
    missing_module: str | None = None  # what a ModuleNotFoundError names (import failures)
    names: list[str] | None = None  # deployment names from a plan
    blip_until: float = 0.0
    deleting_until: float | None = None
    status_override: str | None = None
    message_override: str | None = None

    def deployment_names(self) -> list[str]:
        given = [
            d["name"] for d in self.config.get("deployments") or [] if isinstance(d, dict) and "name" in d
        ]
        if given or self.names:
            return given or list(self.names or [])
        # The real name comes from the user's code; the sim uses the CamelCased attribute name.
        attr = str(self.config["import_path"]).replace(":", ".").rsplit(".", 1)[-1]
        return ["".join(part[:1].upper() + part[1:] for part in attr.split("_"))]


def _validate(body: Any) -> list[dict[str, Any]]:
    """Schema checks with the 400 texts of 181_serve_err_PUT_* and 90_wd_a_*."""
    if not isinstance(body, dict):
        raise ServeRejected(
            400, texts.serve_validation([("", "Input should be a valid dictionary", "dict_type")])
        )
    apps = body.get("applications", [])
    if not isinstance(apps, list):
        raise ServeRejected(
            400, texts.serve_validation([("applications", "Input should be a valid list", "list_type")])
        )
    errors: list[tuple[str, str, str]] = []
    for i, app in enumerate(apps):
        if not isinstance(app, dict) or "import_path" not in app:
            errors.append(
                (
                    f"applications.{i}.import_path",
                    "Field required",
                    f"missing, input_value={app!r}, input_type=dict",
                )
            )
            continue
        path = str(app["import_path"])
        if "." not in path and ":" not in path:
            errors.append(
                (
                    f"applications.{i}.import_path",
                    (
                        f'Value error, Got invalid import path "{path}". An import path must contain at least on dot or colon '
                        "separating the module (and potentially submodules) from the deployment graph. E.g.: "
                        '"module.deployment_graph".'
                    ),
                    f"value_error, input_value='{path}', input_type=str",
                )
            )
        for j, dep in enumerate(app.get("deployments") or []):
            num = dep.get("num_replicas") if isinstance(dep, dict) else None
            if isinstance(num, int) and num <= 0:
                loc = f"applications.{i}.deployments.{j}.num_replicas"
                errors.append(
                    (
                        f"{loc}.constrained-int",
                        "Input should be greater than 0",
                        f"greater_than, input_value={num}, input_type=int",
                    )
                )
                errors.append(
                    (
                        f"{loc}.str",
                        "Input should be a valid string",
                        f"string_type, input_value={num}, input_type=int",
                    )
                )
        working_dir = (app.get("runtime_env") or {}).get("working_dir")
        if isinstance(working_dir, str) and "://" not in working_dir:
            raise ServeRejected(400, texts.working_dir_plain_path(working_dir))
    names = [a.get("name", "default") for a in apps if isinstance(a, dict)]
    dup = next((n for n in names if names.count(n) > 1), None)
    prefixes = [a.get("route_prefix", "/") for a in apps if isinstance(a, dict)]
    dup_prefix = next((p for p in prefixes if p is not None and prefixes.count(p) > 1), None)
    value = f"value_error, input_value={apps!r:.40}, input_type=list"
    if dup is not None:
        errors.append(
            (
                "applications",
                (
                    f'Value error, Found multiple configs for application "{dup}". '
                    "Please remove all duplicates."
                ),
                value,
            )
        )
    elif dup_prefix is not None:
        errors.append(
            (
                "applications",
                (
                    f'Value error, Found duplicate applications for route prefix "{dup_prefix}". '
                    "Please ensure each application's route_prefix is unique."
                ),
                value,
            )
        )
    if errors:
        raise ServeRejected(400, texts.serve_validation(errors))
    return apps


@dataclass(kw_only=True)
class ServeState:
    session: str
    started_at: float | None = None
    http_options: dict[str, Any] = field(default_factory=dict)
    proxy_location: str = "EveryNode"
    apps: dict[str, SimApp] = field(default_factory=dict)
    plans: dict[str, AppPlan] = field(default_factory=dict)
    proxy_healthy: bool = True
    last_config: dict[str, Any] | None = None
    routes_populated: bool = False  # sticky: some app has had deployments since Serve started

    @staticmethod
    def validate(body: Any) -> None:
        """The schema checks a PUT does before anything else (raises ServeRejected)."""
        _validate(body)

    def put(
        self,
        body: Any,
        now: float,
        *,
        deploy_s: float,
        blip_s: float,
        delete_s: tuple[float, float],
        importable: frozenset[str] = imports.DEFAULT_IMPORTABLE_MODULES,
    ) -> None:
        """Apply a declarative config. `delete_s` = (for apps that were serving, for the others)."""
        apps = _validate(body)
        self.populated(now)  # apps replaced below may have populated the route table
        assert isinstance(body, dict)
        if self.started_at is None:
            self.started_at = now  # the first PUT starts controller + proxy (110_*)
            self.http_options = dict(body.get("http_options") or {})  # later port changes are ignored (182_*)
            self.proxy_location = str(body.get("proxy_location", "EveryNode"))
        for app in apps:  # 90_wd_b: archive check happens in apply_config, after Serve started
            wd = (app.get("runtime_env") or {}).get("working_dir")
            if (
                isinstance(wd, str)
                and wd.startswith("file://")
                and not wd.endswith((".zip", ".tar.gz", ".tgz", ".tar.xz"))
            ):
                raise ServeRejected(400, texts.working_dir_not_archive(wd))
        self.last_config = copy.deepcopy(body)
        wanted: dict[str, SimApp] = {}
        for cfg in apps:
            name = str(cfg.get("name", "default"))
            old = self.apps.get(name)
            if old is not None and old.deleting_until is None and old.config == cfg:
                old.blip_until = now + blip_s if self.app_status(old, now) == "RUNNING" else 0.0
                old.deployed_at = now
                wanted[name] = old
                continue
            plan = self.plans.pop(name, AppPlan())
            import_path = str(cfg["import_path"])
            fail = plan.fail if plan.fail is not None else imports.failure(import_path, importable)
            wait = plan.deploy_s if plan.deploy_s is not None else deploy_s
            old_status = None if old is None else self.app_status(old, now)
            serving = old_status in ("RUNNING", "UNHEALTHY") or (
                old_status == "DEPLOYING" and old and old.served_before
            )
            wanted[name] = SimApp(
                name=name,
                config=copy.deepcopy(cfg),
                deployed_at=now,
                ready_at=now + wait,
                fail=fail,
                served_before=bool(serving),
                missing_module=imports.missing_module(import_path, importable) if fail == "import" else None,
                names=plan.deployments,
            )
        for name, old in self.apps.items():
            if name in wanted:
                continue
            if self.app_status(old, now) == "DEPLOY_FAILED" and old.fail == "import" and not old.served_before:
                continue  # README §4 v6: import-error apps vanished immediately (nothing was running)
            if old.deleting_until is None:
                serving = self.app_status(old, now) in ("RUNNING", "UNHEALTHY") or old.served_before
                old.deleting_until = now + (delete_s[0] if serving else delete_s[1])
            wanted[name] = old
        self.apps = wanted

    def shutdown(self) -> None:
        """DELETE /api/serve/applications/ (100_*): serve.shutdown(), proxy port closes."""
        self.started_at = None
        self.apps.clear()
        self.last_config = None
        self.routes_populated = False

    def serving(self, now: float) -> bool:
        """Some app has live replicas (a DELETE then blocks 2.4-3 s, README §8)."""
        return any(self.app_status(a, now) in ("RUNNING", "UNHEALTHY")
                   or (self.app_status(a, now) == "DEPLOYING" and a.served_before)
                   or (self.app_status(a, now) == "DEPLOY_FAILED" and a.served_before)
                   for a in self.apps.values())

    def populated(self, now: float) -> bool:
        """Whether the proxy ever got a route table: once any app has had deployments (a first
        deploy shows none for a while; an import failure never has any)."""
        if not self.routes_populated:
            self.routes_populated = any(self._has_deployments(a, now) for a in self.apps.values())
        return self.routes_populated

    def _has_deployments(self, app: SimApp, now: float) -> bool:
        status = self.app_status(app, now)
        if status in ("RUNNING", "UNHEALTHY") or app.served_before:
            return True
        if status == "DEPLOY_FAILED":
            return app.fail == "ctor"
        return status == "DEPLOYING" and not self._fresh(app, now)

    @staticmethod
    def _fresh(app: SimApp, now: float) -> bool:
        """A first deployment (not an update) shows no route/deployments for its first half; one
        that fails at import never gets any (README §8: `deployments` stays {} throughout)."""
        if app.served_before or now >= app.ready_at:
            return False
        return app.fail == "import" or now < app.deployed_at + (app.ready_at - app.deployed_at) / 2

    def app_status(self, app: SimApp, now: float) -> str:
        if app.deleting_until is not None:
            return "DELETING"
        if now < app.ready_at or now < app.blip_until:
            return "DEPLOYING"
        if app.status_override is not None:
            return app.status_override
        return "DEPLOY_FAILED" if app.fail is not None else "RUNNING"

    def prune(self, now: float) -> None:
        self.apps = {n: a for n, a in self.apps.items() if a.deleting_until is None or a.deleting_until > now}

    def routes(self, now: float) -> dict[str, str]:
        """`/-/routes` (120_*, 162_*): apps with a route, incl. ctor failures, not import failures."""
        self.prune(now)
        out: dict[str, str] = {}
        for app in self.apps.values():
            status = self.app_status(app, now)
            updating = status == "DEPLOYING" and app.served_before
            if (
                status in ("RUNNING", "UNHEALTHY")
                or updating
                or (status == "DEPLOY_FAILED" and (app.fail == "ctor" or app.served_before))
            ):
                out[str(app.config.get("route_prefix", "/"))] = app.name
        return out

    def details(
        self, now: float, *, imperative: bool, browser: bool, proxy_starting_s: float = 0.1
    ) -> dict[str, Any]:
        self.prune(now)
        if self.started_at is None:
            return copy.deepcopy(shapes.EMPTY_DETAILS)
        self.populated(now)
        port = int(self.http_options.get("port", 8000))
        proxy_status = (
            "STARTING"
            if now - self.started_at < proxy_starting_s
            else ("HEALTHY" if self.proxy_healthy else "UNHEALTHY")
        )
        apps = {} if imperative else {name: self._app(app, now) for name, app in self.apps.items()}
        out = {
            "controller_info": shapes.controller_info(self.session),
            "proxy_location": self.proxy_location,
            "http_options": shapes.http_options(self.http_options),
            "grpc_options": dict(shapes.GRPC_OPTIONS),
            "proxies": shapes.proxies(self.session, proxy_status),
            "applications": apps,
            "target_capacity": None,
            "target_groups": shapes.target_groups(port),
            "controller_health_metrics": shapes.controller_health_metrics(now, self.started_at),
            "restores_unset_config_options": True,
        }
        return shapes.redact_env_vars(out) if browser else out

    def _app(self, app: SimApp, now: float) -> dict[str, Any]:
        status = self.app_status(app, now)
        names = app.deployment_names()
        message = ""
        deployments: dict[str, Any] = {}
        route: str | None = str(app.config.get("route_prefix", "/"))
        fresh = status == "DEPLOYING" and self._fresh(app, now)
        if status == "DELETING" or fresh or (status == "DEPLOY_FAILED" and app.fail == "import"):
            # 111_serve_v1_poll_01 / 161_* / README v6: no route, no deployments yet. An update of
            # a serving app that fails at import keeps its route (README §8): old replicas serve.
            if not (status == "DEPLOY_FAILED" and app.served_before):
                route = None
            if status == "DEPLOY_FAILED":
                message = texts.import_failed(app.name, str(app.config["import_path"]),
                                              missing=app.missing_module)
        else:
            deployments = {n: self._deployment(app, n, app_status=status, now=now) for n in names}
            if status == "DEPLOY_FAILED":
                message = texts.ctor_failed_app(names)
            elif status == "UNHEALTHY":
                message = texts.unhealthy_app(names)
        if app.message_override is not None:
            message = app.message_override
        return {
            "name": app.name,
            "route_prefix": route,
            "docs_path": None,
            "status": status,
            "message": message,
            "last_deployed_time_s": app.deployed_at,
            "deployed_app_config": copy.deepcopy(app.config),
            "source": "declarative",
            "deployments": deployments,
            "external_scaler_enabled": False,
            "deployment_topology": shapes.topology(app.name, names)
            if deployments and status != "DEPLOY_FAILED"
            else None,
        }

    def _deployment(self, app: SimApp, name: str, *, app_status: str, now: float) -> dict[str, Any]:
        dep_cfg: dict[str, Any] = next(
            (d for d in app.config.get("deployments") or [] if d.get("name") == name), {}
        )
        cfg = shapes.deployment_config(name, app.config, dep_cfg)
        num = cfg["num_replicas"] if isinstance(cfg["num_replicas"], int) else 1
        seed = f"{self.session}/{app.name}/{name}/{app.deployed_at}"
        state, status, trigger, message = "RUNNING", "HEALTHY", "CONFIG_UPDATE_COMPLETED", ""
        dead: list[dict[str, Any]] = []
        if app_status == "DEPLOYING":
            state, status, trigger = "STARTING", "UPDATING", "CONFIG_UPDATE_STARTED"
        elif app_status == "UNHEALTHY":
            status, trigger = "UNHEALTHY", "HEALTH_CHECK_FAILED"
        elif app_status == "DEPLOY_FAILED":
            status, trigger = "DEPLOY_FAILED", "REPLICA_STARTUP_FAILED"
            message = texts.CTOR_FAILED_DEPLOYMENT.format(app=app.name, dep=name)
            dead = [
                shapes.replica(
                    app.name, name, seed=f"{seed}/dead{i}", state="STOPPED", started=app.deployed_at
                )
                for i in range(3)
            ]
            num = 0
        replicas = [
            shapes.replica(app.name, name, seed=f"{seed}/{i}", state=state, started=app.deployed_at)
            for i in range(num)
        ]
        return shapes.deployment(
            app.name,
            name,
            cfg=cfg,
            status=status,
            trigger=trigger,
            message=message,
            replicas=replicas,
            dead=dead,
        )
