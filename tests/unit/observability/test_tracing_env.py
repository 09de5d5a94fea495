"""OTLP trace export is configured by the standard OTEL_* variables and off when they are unset."""

from __future__ import annotations

from raybus.observability.tracing import otlp_exporter, otlp_requested


def test_off_when_unset() -> None:
    assert not otlp_requested({})
    assert otlp_exporter({}) is None


def test_endpoint_or_exporter_name_turns_it_on() -> None:
    assert otlp_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert otlp_requested({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"})
    assert otlp_requested({"OTEL_TRACES_EXPORTER": "otlp"})
    assert otlp_exporter({"OTEL_TRACES_EXPORTER": "otlp"}) is not None


def test_none_or_sdk_disabled_wins() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert not otlp_requested({**endpoint, "OTEL_TRACES_EXPORTER": "none"})
    assert not otlp_requested({**endpoint, "OTEL_TRACES_EXPORTER": "console"})
    assert not otlp_requested({**endpoint, "OTEL_SDK_DISABLED": "true"})
