"""The service process: a threaded HTTP server answering envservice.urls, with this host's pools and leases."""
from __future__ import annotations

import logging
import threading
from socketserver import ThreadingMixIn

from django.core.handlers.wsgi import WSGIHandler
from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer

from agent.envs import ENV_KINDS
from envservice.pool import Pool
from envservice.services import EnvService, install

log = logging.getLogger(__name__)


class EnvServiceHandler(WSGIHandler):
    """Django's WSGI handler, routing by envservice.urls whatever ROOT_URLCONF says (the webapp's)."""

    def get_response(self, request):
        request.urlconf = "envservice.urls"
        return super().get_response(request)


class _QuietRequestHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - stdlib signature
        log.debug(format, *args)


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def parse_pools(spec: str) -> dict[str, dict]:
    """``"miniwob=2:8,terminal=0:4"`` -> {kind: {"warm": 2, "capacity": 8}}: warm envs kept idle, most at once."""
    pools = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        kind, _, sizes = part.partition("=")
        if kind not in ENV_KINDS:
            raise ValueError(f"unknown env kind {kind!r} in --pools; expected one of: {', '.join(ENV_KINDS)}")
        warm, _, capacity = (sizes or "0").partition(":")
        try:
            pools[kind] = {"warm": int(warm), "capacity": int(capacity or 8)}
        except ValueError as exc:
            raise ValueError(f"--pools {part!r}: write kind=warm:capacity, e.g. miniwob=2:8") from exc
    return pools


def start(*, host: str = "127.0.0.1", port: int = 8200, pools: dict[str, dict] | None = None,
          lease_timeout: float = 120.0, step_timeout: float = 60.0, warm_now: bool = False):
    """Make the service and its server; the caller runs ``server.serve_forever()``. Warm envs are made in the
    background (or before returning, with ``warm_now``). Returns (server, service)."""
    pools = pools if pools is not None else {"miniwob": {"warm": 1, "capacity": 8}}
    service = EnvService(pools={kind: Pool(kind, warm=p["warm"], capacity=p["capacity"], call_timeout=step_timeout)
                                for kind, p in pools.items()},
                         lease_timeout=lease_timeout, step_timeout=step_timeout)
    install(service)
    fillers = [threading.Thread(target=pool.fill, name=f"warm-{pool.kind}", daemon=True)
               for pool in service.pools.values()]
    for thread in fillers:
        thread.start()
    if warm_now:
        for thread in fillers:
            thread.join()
    server = ThreadingServer((host, port), _QuietRequestHandler)
    server.set_app(EnvServiceHandler())
    service.address = f"{service.host}:{server.server_address[1]}"
    return server, service


def stop(server, service) -> None:
    server.shutdown()
    server.server_close()
    service.close()
    install(None)
