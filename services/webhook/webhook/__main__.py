"""`python -m webhook` (raybus-webhook): flags / RAYBUS_* env -> settings -> serve until SIGTERM."""

from __future__ import annotations

import os

from raybus.api.settings import FeatureGates
from raybus.api.validation_webhook import Strictness
from raybus.runtime.service import common_parser, common_settings, serve
from webhook.app import create_app
from webhook.settings import SERVICE, WebhookSettings


def main() -> None:
    parser = common_parser(SERVICE)
    env = os.environ.get
    defaults = WebhookSettings()
    parser.add_argument("--bind", default=env("RAYBUS_WEBHOOK_BIND", defaults.bind))
    parser.add_argument("--port", type=int, default=int(env("RAYBUS_WEBHOOK_PORT", str(defaults.port))))
    parser.add_argument("--tls-cert-file", default=env("RAYBUS_WEBHOOK_TLS_CERT_FILE", defaults.tls_cert_file))
    parser.add_argument("--tls-key-file", default=env("RAYBUS_WEBHOOK_TLS_KEY_FILE", defaults.tls_key_file))
    parser.add_argument("--strictness", choices=[s.value for s in Strictness],
                        default=env("RAYBUS_WEBHOOK_STRICTNESS") or defaults.strictness.value,
                        help="kuberay: KubeRay's checks (names, unique worker groups); full: also the "
                             "operator's whole validation")
    parser.add_argument("--feature-gates", default=env("RAYBUS_FEATURE_GATES", ""))
    args = parser.parse_args()
    try:
        FeatureGates.from_flag(args.feature_gates)
    except ValueError as exc:
        parser.error(str(exc))  # one line, as KubeRay's operator refuses to start
    common = common_settings(SERVICE, args)
    settings = WebhookSettings(**{**common.model_dump(), "bind": args.bind, "port": args.port,
                                  "tls_cert_file": args.tls_cert_file, "tls_key_file": args.tls_key_file,
                                  "strictness": Strictness(args.strictness), "feature_gates": args.feature_gates})
    serve(settings, create_app(settings), needs=())


if __name__ == "__main__":
    main()
