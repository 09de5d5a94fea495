"""The dashboard-poller's flags and RAYBUS_* env (dashboard_poller/__main__.py): the Serve cadence is
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
    (["--serve-interval-s", "-1"], None, "--serve-interval-s: Input should be greater than or equal to 0"),
    (["--serve-interval-s", "often"], None, "argument --serve-interval-s: invalid float value: 'often'"),
    ([], "often", "RAYBUS_SERVE_INTERVAL_S='often' is not a float"),
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
