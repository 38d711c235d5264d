"""Who is working on what: a worker's name, and the heartbeat that keeps a long job's ``heartbeat_at`` fresh so
a dead worker is noticed within seconds. The claims themselves (an episode's, a training run's, a cycle state's
compare-and-set) live with their records' services; this module only keeps them warm."""
from __future__ import annotations

import logging
import os
import socket
import threading

from django.conf import settings
from django.db import close_old_connections, connection

log = logging.getLogger(__name__)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Heartbeat:
    """Calls `beat` every LOUPE_HEARTBEAT_SECONDS while a long job runs (it keeps a `heartbeat_at` fresh), so a
    dead worker is noticed within seconds: episodes, training runs and cycle states."""

    def __init__(self, beat, name: str):
        self.beat, self.name = beat, name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)

    def _run(self):
        try:
            while not self._stop.wait(settings.LOUPE_HEARTBEAT_SECONDS):
                try:
                    self.beat()
                except Exception:  # the database may blip; the next beat retries
                    log.warning("%s failed", self.name, exc_info=True)
                finally:
                    close_old_connections()
        finally:
            # the thread's own connection: an ended thread leaves it open (an idle session an episode, in a
            # worker that runs thousands), so it is closed here
            connection.close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)
