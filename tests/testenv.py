"""Loaded by pytest with `-p tests.testenv` (pyproject addopts), before Django settings are read."""
import os
import tempfile

_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    # A pytest-xdist worker inherits the controller's environment; each worker has a database of its own
    # (pytest-django), so it needs Redis keys, media and checkpoints of its own too: episode 1 of one worker's
    # database is not episode 1 of the other's.
    # The run's id keeps two suites running at once (each with its own LOUPE_TEST_DB_NAME) apart in Redis too.
    _run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:8]
    os.environ["LOUPE_CHANNEL_PREFIX"] = f"{os.environ.get('LOUPE_CHANNEL_PREFIX', 'loupetest')}-{_run}-{_worker}"
    os.environ["LOUPE_MEDIA_ROOT"] = tempfile.mkdtemp(prefix=f"loupe-test-media-{_worker}-")
    os.environ["LOUPE_CHECKPOINT_DIR"] = tempfile.mkdtemp(prefix=f"loupe-test-checkpoints-{_worker}-")
os.environ.setdefault("LOUPE_CHANNEL_PREFIX", f"loupetest{os.getpid()}")
os.environ.setdefault("LOUPE_FAST_PASSWORD_HASHER", "1")
os.environ.setdefault("LOUPE_HEARTBEAT_SECONDS", "1")
os.environ.setdefault("LOUPE_INTERRUPTED_AFTER_SECONDS", "6")
os.environ.setdefault("LOUPE_MEDIA_ROOT", tempfile.mkdtemp(prefix="loupe-test-media-"))
# Checkpoints the tests' training runs write stay out of the developer's .data/checkpoints.
os.environ.setdefault("LOUPE_CHECKPOINT_DIR", tempfile.mkdtemp(prefix="loupe-test-checkpoints-"))
# Playwright's sync API keeps an event loop on the test thread; the ORM calls tests make there are
# plain synchronous ones, so Django's async-context guard does not apply (it does in the servers).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("LOUPE_SUPERVISED_IDLE_SECONDS", "120")
