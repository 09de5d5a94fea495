"""`python -m command_executor`: flags / RAYBUS_* env -> ExecutorSettings -> run until SIGTERM."""

from __future__ import annotations

from command_executor.app import SERVICE, ExecutorSettings, create_app
from raybus.runtime.process import serve
from raybus.runtime.settings import load


def main() -> None:
    settings = load(ExecutorSettings, SERVICE)
    serve(settings, create_app(settings), needs=("nats", "kube"))


if __name__ == "__main__":
    main()
