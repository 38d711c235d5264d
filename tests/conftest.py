"""Shared fixtures: real PostgreSQL and Redis (CI's, or the embedded ones), and real server processes."""
from __future__ import annotations

import pytest

from tests.factories import *  # noqa: E402,F401,F403
from tests.stack import *  # noqa: E402,F401,F403


@pytest.fixture(autouse=True)
def _clear_cache():
    """Forget what the cache holds (login throttling) between tests: only the cache's own keys. cache.clear() is
    FLUSHDB, and the Celery broker's queues and bindings and the channel layer share that Redis database: a
    flush between tests made later tasks route nowhere and events go missing while a module's worker ran."""
    import redis
    from django.conf import settings

    config = settings.CACHES["default"]
    pattern = f"{config['KEY_PREFIX']}:{config.get('VERSION', 1)}:*"
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        keys = list(client.scan_iter(match=pattern, count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
    yield
