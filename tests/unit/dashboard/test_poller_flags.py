"""The dashboard-poller's flags and RAYBUS_* env (runtime.settings.load): the Serve cadence is
a setting like the others, and a bad value is one usage error line, never a traceback."""

from __future__ import annotations

import pytest

from dashboard_poller.__main__ import parse_settings


def test_serve_interval_default_flag_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAYBUS_SERVE_INTERVAL_S", raising=False)
    assert parse_settings([]).poll().serve_interval_s == 2.0  # KubeRay's RayService cadence
    assert parse_settings(["--serve-interval-s", "0"]).poll().serve_interval_s == 0.0
    monkeypatch.setenv("RAYBUS_SERVE_INTERVAL_S", "1.5")
    assert parse_settings([]).poll().serve_interval_s == 1.5
    assert parse_settings(["--serve-interval-s", "3"]).poll().serve_interval_s == 3.0  # the flag wins


@pytest.mark.parametrize(("argv", "env", "says"), [
    # One line naming the flag and the variable, from the flag or the environment alike.
    (["--serve-interval-s", "-1"], None,
     "--serve-interval-s / RAYBUS_SERVE_INTERVAL_S: Input should be greater than or equal to 0"),
    (["--serve-interval-s", "often"], None,
     "--serve-interval-s / RAYBUS_SERVE_INTERVAL_S: Input should be a valid number, unable to parse string as a number"),
    ([], "often",
     "--serve-interval-s / RAYBUS_SERVE_INTERVAL_S: Input should be a valid number, unable to parse string as a number"),
])
def test_a_bad_serve_interval_is_one_line(argv: list[str], env: str | None, says: str,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    if env is None:
        monkeypatch.delenv("RAYBUS_SERVE_INTERVAL_S", raising=False)
    else:
        monkeypatch.setenv("RAYBUS_SERVE_INTERVAL_S", env)
    with pytest.raises(SystemExit) as exited:
        parse_settings(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"dashboard-poller: error: {says}"
    assert "Traceback" not in err
