"""The MiniWoB++ task pages (the ``miniwob`` PyPI package's html), served over HTTP: one loopback server a process
(``serve_miniwob``), or a server answering on a socket made inside an env's sandbox (``PageServer``), so that only
that env's browser reaches them. ``file://`` pages cannot use the shared jQuery UI files reliably."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import socket
import threading
from pathlib import Path
from typing import Any

from agent.envs.base import EnvError

__all__ = ["PageServer", "miniwob_html_dir", "serve_miniwob"]


def miniwob_html_dir() -> Path:
    """The task pages of the ``miniwob`` package, found without importing it (it pulls in
    gymnasium and selenium code we do not use)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or spec.origin is None:
        raise EnvError("the 'miniwob' package is not installed; it provides the MiniWoB++ task pages")
    path = Path(spec.origin).parent / "html"
    if not (path / "miniwob").is_dir():
        raise EnvError(f"MiniWoB++ task pages not found under {path}; is the 'miniwob' package installed?")
    return path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


_server_lock = threading.Lock()


_server_url: str | None = None


def serve_miniwob() -> str:
    """Start (once per process) a loopback HTTP server for the task pages; return its base URL."""
    global _server_url
    with _server_lock:
        if _server_url is None:
            handler = functools.partial(_QuietHandler, directory=str(miniwob_html_dir()))
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            server.daemon_threads = True
            thread = threading.Thread(target=server.serve_forever, name="miniwob-http", daemon=True)
            thread.start()
            _server_url = f"http://127.0.0.1:{server.server_address[1]}/"
        return _server_url


class PageServer(http.server.ThreadingHTTPServer):
    """The task pages served on ``listener``, a socket listening inside an env's sandbox: only its browser reaches
    them. Answered by a thread of the worker, as serve_miniwob's."""

    daemon_threads = True

    def __init__(self, listener: socket.socket) -> None:
        handler = functools.partial(_QuietHandler, directory=str(miniwob_html_dir()))
        super().__init__(listener.getsockname()[:2], handler, bind_and_activate=False)
        self.socket.close()
        self.socket = listener
        self.server_name, self.server_port = "127.0.0.1", listener.getsockname()[1]
        self._thread = threading.Thread(target=self.serve_forever, name="miniwob-pages", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}/"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
