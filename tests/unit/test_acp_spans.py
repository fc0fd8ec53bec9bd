"""The ACP SDK's per-message tracing spans are turned off while no tracer
provider would record them (two spans per streamed update, each ~40 times
the cost of none), and kept when one is configured."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from acp import telemetry
from opentelemetry import trace

from corral.supervisor.acp.wire import quiet_unrecorded_spans


@pytest.fixture
def tracer() -> Iterator[None]:
    before = telemetry.TRACER
    telemetry.TRACER = trace.get_tracer("acp.telemetry")
    try:
        yield
    finally:
        telemetry.TRACER = before


def test_no_provider_configured_no_spans(tracer: None) -> None:
    assert type(trace.get_tracer_provider()) is trace.ProxyTracerProvider
    assert telemetry.TRACER is not None  # what the SDK starts with
    quiet_unrecorded_spans()
    assert telemetry.TRACER is None
    with telemetry.span_context("acp.notification", attributes={"method": "x"}):
        pass  # a null context now


def test_a_configured_provider_keeps_them(tracer: None, monkeypatch: pytest.MonkeyPatch) -> None:
    class Configured(trace.NoOpTracerProvider):
        pass

    monkeypatch.setattr(trace, "get_tracer_provider", lambda: Configured())
    quiet_unrecorded_spans()
    assert telemetry.TRACER is not None
