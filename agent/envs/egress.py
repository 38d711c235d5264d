"""The one way out of a browser's sandbox: a SOCKS5 proxy that connects only where the episode's task may go.

A webapp env's browser contexts use it for every address but the env's own sites (which are served inside the
sandbox's network namespace and reached directly); the proxy listens inside that namespace and connects from the
worker's, so a page reaches a team's app on the host, and nothing else:

- a host must be one of ``LOUPE_WEBAPP_ALLOWED_HOSTS`` (any-URL tasks' hosts); other hosts are refused;
- an address on the loopback (127.0.0.0/8, ::1, 0.0.0.0) only at a port the task's own URLs name: Loupe's web server,
  Redis, PostgreSQL and whatever else listens on the worker's loopback stay out of reach;
- never Loupe's own Redis or PostgreSQL (``REDIS_URL``, ``DATABASE_URL``, ``CELERY_BROKER_URL``), whatever name or
  address leads there.

SOCKS5 rather than an HTTP proxy: every connection (http, https, WebSocket) is one tunnel to one host and port the
proxy names and checks, with no request parsing. Refused and failed connections are answered with SOCKS error codes
(the page sees a network error) and kept in ``refused`` and ``failed`` for the step's and the reset's message.
"""

from __future__ import annotations

import ipaddress
import os
import selectors
import socket
import struct
import threading
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["EgressProxy", "EgressRules", "loupe_endpoints"]


def loupe_endpoints() -> list[tuple[str, int]]:
    """(host, port) of Loupe's own Redis and PostgreSQL, from the settings' URLs (a unix-socket URL has none)."""
    found = []
    for key, default_port in (("REDIS_URL", 6379), ("CELERY_BROKER_URL", 6379), ("DATABASE_URL", 5432)):
        raw = os.environ.get(key, "")
        if not raw:
            continue
        try:
            parts = urlsplit(raw)
            host, port = parts.hostname, parts.port or default_port
        except ValueError:
            continue
        if host:
            found.append((host, port))
    return found


def _addresses(host: str, port: int) -> list[tuple]:
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


def _is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    return address.is_loopback or address.is_unspecified


@dataclass
class EgressRules:
    """Where an episode's browser may connect: ``hosts`` by name (lower case), and on the loopback only
    ``loopback_ports``."""

    hosts: frozenset[str] = frozenset()
    loopback_ports: frozenset[int] = frozenset()
    denied: list[tuple[str, int]] = field(default_factory=loupe_endpoints)

    def check(self, host: str, port: int) -> tuple[list[tuple], str]:
        """(addresses to try, "") when allowed; ([], why) when not."""
        if host.lower().rstrip(".") not in self.hosts:
            return [], f"{host} is not an allowed host"
        try:
            addresses = _addresses(host, port)
        except OSError as exc:
            return [], f"{host} does not resolve ({exc})"
        denied = set()
        for name, denied_port in self.denied:
            try:
                denied |= {(info[4][0], denied_port) for info in _addresses(name, denied_port)}
            except OSError:
                continue
        allowed = []
        for info in addresses:
            ip = info[4][0]
            if (ip, port) in denied or (_is_loopback(ip) and any(_is_loopback(d) and p == port for d, p in denied)):
                return [], f"{host}:{port} is one of Loupe's own services"
            if _is_loopback(ip) and port not in self.loopback_ports:
                return [], f"{host}:{port} is on the loopback at a port the task does not name"
            allowed.append(info)
        return allowed, ""


class EgressProxy:
    """A SOCKS5 server on ``listener`` (a listening socket: the sandbox's, from ``Sandbox.listen``) with ``rules``,
    which the env replaces per episode. Threads: one accepting, one a connection (a browser opens a handful)."""

    def __init__(self, listener: socket.socket, rules: EgressRules | None = None, *, timeout_s: float = 10.0) -> None:
        self.listener = listener
        self.rules = rules or EgressRules()
        self.timeout_s = timeout_s
        self.refused: list[str] = []  # "host:port (why)" of connections the rules refused
        self.failed: dict[tuple[str, int], str] = {}  # (host, port) -> why an allowed connection failed, as Chromium says
        self.port = listener.getsockname()[1]
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="egress-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"socks5://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._closed = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self._thread.join(timeout=2)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), name="egress-conn", daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        try:
            client.settimeout(self.timeout_s)
            host, port = self._handshake(client)
            addresses, why = self.rules.check(host, port)
            if not addresses:
                self.refused.append(f"{host}:{port} ({why})")
                client.sendall(_reply(2))  # connection not allowed by ruleset
                return
            error: OSError | None = None
            for family, kind, proto, _, address in addresses:
                try:
                    upstream = socket.socket(family, kind, proto)
                    upstream.settimeout(self.timeout_s)
                    upstream.connect(address)
                    break
                except OSError as exc:
                    upstream.close()
                    upstream, error = None, exc
            if upstream is None:
                refused = isinstance(error, ConnectionRefusedError)
                self.failed[(host.lower(), port)] = "net::ERR_CONNECTION_REFUSED" if refused else (
                    "net::ERR_CONNECTION_TIMED_OUT" if isinstance(error, TimeoutError) else f"{error}")
                client.sendall(_reply(5 if refused else 4))
                return
            client.sendall(_reply(0))
            _relay(client, upstream)
        except (OSError, ValueError):
            pass
        finally:
            client.close()
            if upstream is not None:
                upstream.close()

    @staticmethod
    def _handshake(client: socket.socket) -> tuple[str, int]:
        version, count = _read(client, 2)
        methods = _read(client, count)
        if version != 5 or 0 not in methods:
            client.sendall(b"\x05\xff")
            raise ValueError("not a SOCKS5 client without authentication")
        client.sendall(b"\x05\x00")
        version, command, _, kind = _read(client, 4)
        if version != 5 or command != 1:
            client.sendall(_reply(7))  # command not supported: CONNECT only
            raise ValueError("only CONNECT")
        if kind == 1:
            host = socket.inet_ntop(socket.AF_INET, _read(client, 4))
        elif kind == 4:
            host = socket.inet_ntop(socket.AF_INET6, _read(client, 16))
        elif kind == 3:
            host = _read(client, _read(client, 1)[0]).decode("idna")
        else:
            client.sendall(_reply(8))
            raise ValueError("unknown address type")
        (port,) = struct.unpack(">H", _read(client, 2))
        return host, port


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ValueError("the client went away")
        data += chunk
    return data


def _reply(code: int) -> bytes:
    return bytes([5, code, 0, 1, 0, 0, 0, 0, 0, 0])


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until both sides are done (a half-closed side lets the other finish)."""
    a.settimeout(None)
    b.settimeout(None)
    with selectors.DefaultSelector() as sel:
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        open_sides = 2
        while open_sides:
            for key, _ in sel.select():
                source, target = key.fileobj, key.data
                try:
                    chunk = source.recv(65536)
                except OSError:
                    return
                if chunk:
                    try:
                        target.sendall(chunk)
                    except OSError:
                        return
                else:
                    sel.unregister(source)
                    open_sides -= 1
                    try:
                        target.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
