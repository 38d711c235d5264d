"""Shared fixtures: real PostgreSQL and Redis (CI's, or the embedded ones), and real server processes."""
from __future__ import annotations

import pytest

from tests.factories import *  # noqa: E402,F401,F403
from tests.stack import *  # noqa: E402,F401,F403


@pytest.fixture(autouse=True)
def _clear_cache():
    from django.core.cache import cache

    cache.clear()
    yield
