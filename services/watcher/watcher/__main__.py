"""`python -m watcher`: flags / RAYBUS_* env -> WatcherSettings -> run until SIGTERM."""

from __future__ import annotations

from raybus.runtime.process import serve
from raybus.runtime.settings import load
from watcher.app import SERVICE, WatcherSettings, create_app


def main() -> None:
    settings = load(WatcherSettings, SERVICE)
    serve(settings, create_app(settings), needs=("nats", "kube"))


if __name__ == "__main__":
    main()
