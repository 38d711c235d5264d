"""The locally served sites of the ``webapp`` env: build once, copy the golden database per episode, serve.

The django-oscar shop lives in the repository (``sites/oscar/``: settings, URLs, a seed command) and runs
from its own virtual environment under ``$LOUPE_SITES_DIR/oscar/venv`` (default ``.data/sites``), never
from Loupe's: oscar pins its own Django and friends. ``python -m agent.envs.webapp build`` (what
``make sites`` runs) creates that venv from ``sites/oscar/requirements.txt`` and a *golden* build: the
SQLite database migrated and seeded, the search index (whoosh ``rebuild_index``: without it the
catalogue is empty), the collected static files and the product pictures with their thumbnails made.
Each part is stamped with a hash of what made it, so a second run does nothing (under a second) and a
changed requirement or seed rebuilds only what depends on it. Two processes building at once wait on a
file lock.

Per episode the golden database is copied (about 2 ms) and put in place atomically; the server opens
the file again on every request (``CONN_MAX_AGE = 0``, no cache), so the next request sees the fresh
copy. The server is ``serve.py`` under waitress on a free loopback port, one a ``ShopServer``; it exits
by itself when the process that started it is gone.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from agent.envs.base import EnvError

__all__ = ["MEDIAWIKI", "OSCAR_SOURCE", "WIKI_SOURCE", "ShopServer", "SiteBuildError", "WikiServer", "build_oscar",
           "build_wiki", "copy_database", "copy_wiki", "oscar_home", "sites_dir", "wiki_missing"]

OSCAR_SOURCE = Path(__file__).with_name("sites") / "oscar"
WIKI_SOURCE = Path(__file__).with_name("sites") / "wiki"
MEDIAWIKI = Path(os.environ.get("LOUPE_MEDIAWIKI_DIR", "/usr/share/mediawiki"))  # Debian's mediawiki package
WIKI_PACKAGES = ("mediawiki", "php-sqlite3", "php-cli")
WIKI_BUILD = "2"  # raised when build_wiki changes what it makes, so built wikis are made again
REPO = Path(__file__).resolve().parents[3]
OSCAR_BUILD = "1"  # raised when build_oscar changes what it makes (steps, warming), so built shops are made again
_PYTHON = os.environ.get("LOUPE_SITES_PYTHON", "python3.11" if shutil.which("python3.11") else sys.executable)
STAFF_LOGIN = ("staff@example.com", "staff-password")
CUSTOMER_LOGIN = ("customer@example.com", "customer-password")


class SiteBuildError(EnvError):
    """A site could not be built (packages not installable, a failing migration); the message says which step."""


def sites_dir() -> Path:
    data = Path(os.environ.get("LOUPE_DATA_DIR", REPO / ".data"))
    return Path(os.environ.get("LOUPE_SITES_DIR", data / "sites"))


def oscar_home() -> Path:
    return sites_dir() / "oscar"


def _hash(*paths: Path) -> str:
    digest = hashlib.sha256()
    for root in paths:
        files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts) \
            if root.is_dir() else [root]
        for path in files:
            digest.update(str(path.relative_to(root.parent)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _run(argv: list[str], *, step: str, log: Path, env: dict | None = None, cwd: Path | None = None,
         timeout: float = 900) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        try:
            result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SiteBuildError(f"building the shop failed at '{step}': {exc}; see {log}") from exc
    if result.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise SiteBuildError(f"building the shop failed at '{step}' (exit {result.returncode}); see {log}:\n"
                             + "\n".join(tail))


def site_env(data: Path, db: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTHON"))}
    env.update(SHOP_DATA=str(data), SHOP_DB=str(db), DJANGO_SETTINGS_MODULE="shopsite.settings",
               PYTHONDONTWRITEBYTECODE="1")
    return env


def build_oscar(*, quiet: bool = False, log: Path | None = None) -> tuple[Path, bool]:
    """Make the shop's venv and golden build if missing or stale (idempotent); return the golden folder and
    whether anything was built. The steps' output goes to ``log`` (default ``<sites>/oscar/build.log``)."""
    home = oscar_home()
    home.mkdir(parents=True, exist_ok=True)
    log = log or home / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    built = False
    say = (lambda message: None) if quiet else (lambda message: print(message, flush=True))
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        venv, golden = home / "venv", home / "golden"
        python = venv / "bin" / "python"
        venv_stamp = _hash(OSCAR_SOURCE / "requirements.txt")
        if not python.exists() or _stamp(venv) != venv_stamp:
            say("Installing the webapp shop's packages (django-oscar, its own venv under "
                f"{venv}; about a minute on a first run)…")
            shutil.rmtree(venv, ignore_errors=True)
            _run([_PYTHON, "-m", "venv", str(venv)], step="create the venv", log=log)
            _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r",
                  str(OSCAR_SOURCE / "requirements.txt")], step="pip install -r requirements.txt", log=log)
            _write_stamp(venv, venv_stamp)
            built = True
        golden_stamp = venv_stamp + _hash(OSCAR_SOURCE / "shopsite", OSCAR_SOURCE / "serve.py") + OSCAR_BUILD
        if _stamp(golden) != golden_stamp:
            say("Building the webapp shop's golden database (migrate, seed, search index; about 40 s)…")
            work = home / "golden.building"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            env = site_env(work, work / "golden.sqlite3")
            manage = [str(python), str(OSCAR_SOURCE / "manage.py")]
            for argv, step in (
                (["migrate", "--noinput", "-v0"], "migrate"),
                (["seed_shop"], "seed the catalogue"),
                (["rebuild_index", "--noinput", "-v0"], "rebuild_index (search)"),
                (["collectstatic", "--noinput", "-v0"], "collectstatic"),
            ):
                _run(manage + argv, step=step, log=log, env=env, cwd=OSCAR_SOURCE)
            _warm_thumbnails(python, work, log)
            # Swapped in at the end: a server still serving the old build's files loses them only for a moment.
            _write_stamp(work, golden_stamp)
            old = home / "golden.old"
            shutil.rmtree(old, ignore_errors=True)
            if golden.exists():
                golden.rename(old)
            work.rename(golden)
            shutil.rmtree(old, ignore_errors=True)
            built = True
        return golden, built


def _stamp(folder: Path) -> str:
    try:
        return (folder / ".loupe-stamp").read_text().strip()
    except OSError:
        return ""


def _write_stamp(folder: Path, value: str) -> None:
    (folder / ".loupe-stamp").write_text(value + "\n")


def _warm_thumbnails(python: Path, data: Path, log: Path) -> None:
    """Visit every page that shows a picture once, so the golden build holds the thumbnails (a first
    visit otherwise spends seconds making them, inside an agent's episode)."""
    server = ShopServer(data=data, db=data / "golden.sqlite3", python=python, log=log)
    try:
        server.start()
        pages = ["/catalogue/", "/catalogue/?page=2", "/basket/"] + [
            f"/catalogue/category/{path}/" for path in ("books_1", "electronics_5", "home_8")]
        pages += [f"/catalogue/p_{pk}/" for pk in range(1, 37)]
        for page in pages:
            try:
                urllib.request.urlopen(server.url + page, timeout=60).read()
            except OSError:
                pass  # a product URL with the wrong slug redirects; a 404 is no reason to fail the build
    finally:
        server.stop()


def copy_database(golden: Path, target: Path) -> None:
    """Put a fresh copy of the golden database at ``target`` atomically (the server may be reading)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".db-")
    os.close(fd)
    shutil.copyfile(golden, tmp)
    os.replace(tmp, target)
    for suffix in ("-wal", "-shm", "-journal"):
        Path(str(target) + suffix).unlink(missing_ok=True)


class _SiteProcess:
    """A site's server process, started in its own process group (``start_new_session``)."""

    process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _end_group(process: subprocess.Popen) -> None:
    """Stop a server and everything it started (its process group): TERM, then KILL after 5 s."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, 15)
        process.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(process.pid, 9)
        except ProcessLookupError:
            pass
        process.wait(timeout=5)


class ShopServer(_SiteProcess):
    """One shop server process on a free loopback port, serving the database file ``db``. ``enter``: an argv prefix
    that puts it in a browser's sandbox network namespace (``Sandbox.network_prefix``), whose loopback it serves."""

    def __init__(self, *, data: Path, db: Path, python: Path | None = None, log: Path | None = None,
                 start_timeout_s: float = 30.0, enter: list[str] | None = None) -> None:
        self.data, self.db = data, db
        self.python = python or oscar_home() / "venv" / "bin" / "python"
        self.log = log
        self.start_timeout_s = start_timeout_s
        self.enter = list(enter or [])
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> str:
        if self.alive():
            return self.url
        if not self.python.exists():
            raise EnvError(f"the shop's Python {self.python} is missing; build the sites first (make sites)")
        log = self.log or self.db.parent / "server.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        offset = log.stat().st_size if log.exists() else 0
        with log.open("a") as stderr:
            try:
                self.process = subprocess.Popen(
                    [*self.enter, str(self.python), str(OSCAR_SOURCE / "serve.py")], cwd=OSCAR_SOURCE,
                    env=site_env(self.data, self.db), stdout=subprocess.PIPE, stderr=stderr, text=True,
                    start_new_session=True,
                )
            except OSError as exc:
                raise EnvError(f"the shop could not be started: {exc}") from exc
        line, timed_out = self._first_line()
        if not line.startswith("LISTENING "):
            self.stop()
            with log.open(errors="replace") as f:
                f.seek(offset)
                lines = [x for x in f.read().strip().splitlines() if x.strip()]
            reason = (f"no answer in {self.start_timeout_s:.0f} s" if timed_out else
                      lines[-1] if lines else "it exited without a word")
            raise EnvError(f"the shop site did not start: {reason} (log: {log})")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        return self.url

    def _first_line(self) -> tuple[str, bool]:
        """The server's first line, and whether it timed out (False when it exited or spoke)."""
        assert self.process is not None and self.process.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + self.start_timeout_s
            while time.monotonic() < deadline:
                if sel.select(timeout=0.2):
                    return self.process.stdout.readline().strip(), False
                if self.process.poll() is not None:
                    return "", False
        return "", True

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        _end_group(process)
        if process.stdout:
            process.stdout.close()


# -- the MediaWiki wiki (Debian's mediawiki, php-sqlite3, php-cli; served by php -S) -------------------------------
def wiki_missing() -> list[str]:
    """What this machine lacks to serve the wiki (empty: it can); the Debian packages that bring it."""
    missing = []
    if shutil.which("php") is None:
        missing.append("php-cli")
    if not (MEDIAWIKI / "index.php").is_file():
        missing.append("mediawiki")
    else:
        probe = subprocess.run(["php", "-r", "exit(extension_loaded('pdo_sqlite') ? 0 : 1);"], capture_output=True) \
            if shutil.which("php") else None
        if probe is not None and probe.returncode != 0:
            missing.append("php-sqlite3")
    return missing


def wiki_home() -> Path:
    return sites_dir() / "wiki"


def build_wiki(*, quiet: bool = False, log: Path | None = None) -> tuple[Path, bool]:
    """The wiki's golden build (MediaWiki installed on SQLite, the pages of sites/wiki/pages saved in it): made if
    missing or stale, idempotent; SiteBuildError naming the Debian packages when MediaWiki is not installed."""
    missing = wiki_missing()
    if missing:
        raise SiteBuildError(f"the wiki needs the Debian packages {', '.join(missing)} (make env-tools installs them)")
    home = wiki_home()
    home.mkdir(parents=True, exist_ok=True)
    log = log or home / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    say = (lambda message: None) if quiet else (lambda message: print(message, flush=True))
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        golden = home / "golden"
        version = next(iter(sorted(MEDIAWIKI.glob("includes/Defines.php"))), MEDIAWIKI / "index.php")
        stamp = _hash(WIKI_SOURCE) + _hash(version) + WIKI_BUILD
        if _stamp(golden) == stamp:
            return golden, False
        say("Building the webapp wiki's golden database (MediaWiki on SQLite, seeded pages; about 20 s)…")
        work = home / "golden.building"
        shutil.rmtree(work, ignore_errors=True)
        (work / "data").mkdir(parents=True)
        _run(["php", "maintenance/install.php", "--dbtype", "sqlite", "--dbpath", str(work / "data"), "--dbname",
              "wiki", "--server", "http://127.0.0.1", "--scriptpath", "", "--lang", "en", "--pass",
              "wiki-admin-password-1", "--confpath", str(work), "Loupe Wiki", "Admin"],
             step="MediaWiki install.php", log=log, cwd=MEDIAWIKI)
        settings = (work / "LocalSettings.php").read_text()
        # The data folder is the episode's copy and the server's port is the episode's: both read per request.
        settings = re.sub(r'(?m)^\$wgSQLiteDataDir = .*$',
                          lambda m: f'$wgSQLiteDataDir = getenv("WIKI_DATA") ?: "{work / "data"}";', settings)
        settings = re.sub(r'(?m)^\$wgServer = .*$', "$wgServer = WebRequest::detectServer();", settings)
        settings += "\n$wgJobRunRate = 1;\n$wgLogos = ['1x' => \"$wgResourceBasePath/resources/assets/mediawiki.png\"];\n"
        (work / "LocalSettings.php").write_text(settings)
        env = {**os.environ, "MW_CONFIG_FILE": str(work / "LocalSettings.php"), "WIKI_DATA": str(work / "data")}
        for page in sorted((WIKI_SOURCE / "pages").glob("*.wiki")):
            with page.open() as text:
                _run_stdin(["php", "maintenance/edit.php", "--user", "Admin", "--summary", "Seeded by Loupe",
                            page.stem.replace("_", " ")], stdin=text, step=f"save the page {page.stem}", log=log,
                           env=env, cwd=MEDIAWIKI)
        _run(["php", "maintenance/runJobs.php", "--quiet"], step="runJobs", log=log, env=env, cwd=MEDIAWIKI)
        _write_stamp(work, stamp)
        old = home / "golden.old"
        shutil.rmtree(old, ignore_errors=True)
        if golden.exists():
            golden.rename(old)
        work.rename(golden)
        # LocalSettings names the build folder as the default data folder: point it at the final one.
        final = (golden / "LocalSettings.php").read_text().replace(str(work / "data"), str(golden / "data"))
        (golden / "LocalSettings.php").write_text(final)
        shutil.rmtree(old, ignore_errors=True)
        return golden, True


def _run_stdin(argv: list[str], *, stdin: Any, step: str, log: Path, env: dict, cwd: Path) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        result = subprocess.run(argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, timeout=120)
    if result.returncode != 0:
        raise SiteBuildError(f"building the wiki failed at '{step}' (exit {result.returncode}); see {log}")


def copy_wiki(golden: Path, target: Path) -> None:
    """The golden wiki's SQLite files into ``target`` (the episode's data folder), each put in place atomically."""
    target.mkdir(parents=True, exist_ok=True)
    for path in (golden / "data").glob("*.sqlite"):
        copy_database(path, target / path.name)
    (target / "locks").mkdir(exist_ok=True)


def _die_with_parent() -> None:
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class WikiServer(_SiteProcess):
    """One ``php -S`` serving MediaWiki on a free loopback port, reading the episode's data folder ``data``. In a
    browser's sandbox: ``sandbox`` (a broker ``Sandbox``) gives the port, the network namespace it serves in, and the
    connections that check it answers."""

    def __init__(self, *, golden: Path, data: Path, log: Path, start_timeout_s: float = 20.0,
                 sandbox: Any = None) -> None:
        self.golden, self.data, self.log = golden, data, log
        self.start_timeout_s = start_timeout_s
        self.sandbox = sandbox
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> str:
        if self.alive():
            return self.url
        if wiki_missing():
            raise EnvError(f"the wiki needs the Debian packages {', '.join(wiki_missing())}")
        with (self.sandbox.listen() if self.sandbox else socket.socket()) as sock:
            if not self.sandbox:  # php -S wants a port: take a free one (a lost race is tried again below)
                sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env = {**os.environ, "MW_CONFIG_FILE": str(self.golden / "LocalSettings.php"), "WIKI_DATA": str(self.data),
               "PHP_CLI_SERVER_WORKERS": "4"}
        enter = self.sandbox.network_prefix() if self.sandbox else []
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as out:
            # opcache: php -S compiles MediaWiki's code on every request without it (seconds a page)
            self.process = subprocess.Popen([*enter, "php", "-d", "opcache.enable_cli=1", "-S", f"127.0.0.1:{port}",
                                             "-t", str(MEDIAWIKI)], cwd=MEDIAWIKI,
                                            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=_die_with_parent)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] or ["it exited"]
                self.process = None
                raise EnvError(f"the wiki did not start: {tail[0]} (log: {self.log})")
            try:
                status, body = self._get(port, "/index.php?title=Main_Page")
            except OSError:
                time.sleep(0.1)
                continue
            if status >= 400:  # it answers, broken: no use waiting
                text = re.sub(r"<[^>]+>|\s+", " ", body.decode("utf-8", "replace")).strip()
                self.stop()
                raise EnvError(f"the wiki did not start: it answered HTTP {status}: {text[:200]}")
            self.url = f"http://127.0.0.1:{port}"
            return self.url
        self.stop()
        raise EnvError(f"the wiki did not answer in {self.start_timeout_s:.0f} s (log: {self.log})")

    def _get(self, port: int, path: str) -> tuple[int, bytes]:
        """GET ``path`` from the wiki (through the sandbox's loopback when it serves there); OSError when it does
        not answer yet."""
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        if self.sandbox:
            connection.sock = self.sandbox.connect(port)
            connection.sock.settimeout(5)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read()
        except http.client.HTTPException as exc:
            raise OSError(str(exc)) from exc
        finally:
            connection.close()

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            _end_group(process)


def main(argv: list[str]) -> int:
    """``build [--log PATH]``: what ``make sites`` runs; says a line a step it takes, nothing when up to date."""
    if argv[:1] != ["build"] or len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--log"):
        print("usage: python -m agent.envs.webapp build [--log PATH]", file=sys.stderr)
        return 2
    log = Path(argv[2]) if len(argv) == 3 else None
    started = time.monotonic()
    try:
        golden, built = build_oscar(log=log)
    except SiteBuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    if built:
        print(f"The webapp shop is built: {golden} ({time.monotonic() - started:.0f} s)")
    missing = wiki_missing()
    if missing:
        print(f"The webapp wiki is left out: it needs the Debian packages {', '.join(missing)} (make env-tools installs them)")
        return 0
    started = time.monotonic()
    try:
        wiki, built = build_wiki(log=log)
    except SiteBuildError as exc:  # the wiki is optional: say why its tasks will not start, but let Loupe start
        print(f"The webapp wiki is left out: {exc}", file=sys.stderr)
        return 0
    if built:
        print(f"The webapp wiki is built: {wiki} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
