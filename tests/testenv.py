"""Loaded by pytest with `-p tests.testenv` (pyproject addopts), before Django settings are read."""
import os
import tempfile

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
