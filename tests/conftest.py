"""Fixtures shared by every test module (helpers live in tests/helpers.py)."""

from __future__ import annotations

import pytest

from tests.helpers import STACKS


@pytest.fixture(params=STACKS)
def stack(request) -> str:
    """Each shipped stack in turn."""
    return request.param
