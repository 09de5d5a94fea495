"""`python -m webhook` (raybus-webhook): flags / RAYBUS_* env -> settings -> serve until SIGTERM."""

from __future__ import annotations

from raybus.runtime.process import serve
from raybus.runtime.settings import load
from webhook.app import create_app
from webhook.settings import SERVICE, WebhookSettings


def main() -> None:
    settings = load(WebhookSettings, SERVICE)
    serve(settings, create_app(settings), needs=())


if __name__ == "__main__":
    main()
