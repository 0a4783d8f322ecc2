"""The engine tier's report: one line per checked worker, printed after the tests, pass or fail."""

from __future__ import annotations

import pytest

# The one checker run both test_engine.py and test_overrides.py read, once a session.
from tests.engine.checked import engine  # noqa: F401

_LINES: list[str] = []


@pytest.fixture(scope="session")
def engine_summary() -> list[str]:
    """Lines for the report; the `engine` fixture fills it."""
    return _LINES


def pytest_terminal_summary(terminalreporter) -> None:
    if _LINES:
        terminalreporter.section("engine tier: each worker through Dynamo's parser and vLLM's KV check")
        for line in _LINES:
            terminalreporter.write_line(line)

