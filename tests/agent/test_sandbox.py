"""Sandboxes that hold (issue 42): a task's setup and checker commands, a desktop app, a hybrid task's and a terminal's
shell, and every env's browser reach none of Loupe's data or services, while the task's own work succeeds; an X display
refuses a client without its cookie; a fork bomb or a memory hog fails its own episode and nothing else.

The probe (sandbox_probe.py) runs inside the sandbox and tries: a world-readable file in Loupe's data folder (the
sandbox's mounts hide it, not only permissions) and one of the media, the test Redis and PostgreSQL ports, Loupe's API
(a real daphne), PostgreSQL's unix socket, and another desktop's display.
"""

from __future__ import annotations

import base64
import copy
import functools
import glob
import http.server
import json
import os
import secrets
import shutil
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from agent.actions import Action
from agent.envs import EnvError
from agent.envs.sandbox import Limits, support

needs_sandbox = pytest.mark.skipif(not support().namespaces, reason=f"no sandbox can be made here: {support().reason}")
needs_desktop = pytest.mark.skipif(
    not support().namespaces or shutil.which("Xvfb") is None or shutil.which("xterm") is None,
    reason="needs a sandbox and the desktop packages (make test-tools installs them)")

PROBE = Path(__file__).with_name("sandbox_probe.py")


@pytest.fixture(scope="module")
def targets(daphne_server):
    """What no sandbox may reach (see the module docstring); removed afterwards."""
    from django.conf import settings

    secret = Path(settings.DATA_DIR) / f"probe-secret-{uuid.uuid4().hex[:8]}"
    secret.write_text("every project's data")
    secret.chmod(0o644)
    media = Path(settings.MEDIA_ROOT) / f"probe-media-{uuid.uuid4().hex[:8]}"
    media.parent.mkdir(parents=True, exist_ok=True)
    media.write_text("a screenshot")
    media.chmod(0o644)
    redis, database = urlsplit(settings.REDIS_URL), settings.DATABASES["default"]
    ports = {"redis": redis.port or 6379, "loupe api": urlsplit(daphne_server).port}
    if str(database.get("HOST") or "127.0.0.1").startswith(("127.", "localhost")):
        ports["postgresql"] = int(database.get("PORT") or 5432)
    sockets = glob.glob("/var/run/postgresql/.s.PGSQL.*") + glob.glob(f"{database.get('HOST') or '/nonexistent'}/.s.*")
    yield {"files": [str(secret), str(media)], "ports": ports, "sockets": [s for s in sockets if not s.endswith("lock")]}
    secret.unlink()
    media.unlink()


def _assert_nothing_reached(where: str, result: dict, targets: dict, *, own_display: bool = False) -> None:
    tried = len(targets["files"]) + len(targets["ports"]) + len(targets.get("sockets", [])) + len(
        targets.get("displays", []))
    assert len([key for key in result if key != "own display"]) == tried, (where, result)
    reached = {key: value for key, value in result.items() if value == "reached"}
    assert not reached, f"{where} reached {reached}"
    if own_display:
        assert result["own display"] == "works", (where, result)


# -- the desktop ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def other_display():
    """Another desktop's display, as another episode's would be."""
    from agent.envs.desktop.session import Desktop

    other = Desktop()
    other.start()
    yield other
    other.close()


def _probe_task(targets: dict) -> dict:
    """A task as a manager writes one: its setup puts the probe in the home and runs it, then writes the task's own
    file and opens a terminal; its checker runs the probe again and reads the file."""
    code = base64.b64encode(PROBE.read_bytes()).decode()
    put = f"echo {code} | base64 -d > ~/probe.py && echo '{json.dumps(targets)}' > ~/probe-args.json"
    return {
        "id": "sandbox-probe", "instruction": "Write hello into greeting.txt.", "hybrid": True,
        "config": [
            {"type": "execute", "parameters": {"command": f"{put} && python3 ~/probe.py setup && echo hello > "
                                                          "~/greeting.txt", "shell": True}},
            {"type": "launch", "parameters": {"command": ["xterm"]}},
        ],
        "evaluator": {"func": "check_include_exclude",
                      "result": {"type": "vm_command_line", "command": "python3 ~/probe.py checker; cat ~/greeting.txt",
                                 "shell": True},
                      "expected": {"type": "rule", "rules": {"include": ["probe done", "hello"],
                                                             "exclude": ["reached"]}}},
    }


@needs_desktop
def test_a_desktop_tasks_setup_checker_terminal_and_shell_reach_none_of_loupe(targets, other_display):
    from agent.envs.desktop import DesktopEnv

    reach = {**targets, "displays": [other_display.name]}
    with DesktopEnv(elements=False) as env:
        env.add_task(_probe_task(reach))
        env.reset("sandbox-probe", 0)
        results = {"setup": json.loads((env.home / "probe-setup.json").read_text())}
        env.step(Action("type", {"text": "python3 probe.py app\n"}))  # in the terminal the setup opened
        deadline = time.monotonic() + 20
        while not (env.home / "probe-app.json").exists():
            assert time.monotonic() < deadline, "the probe typed into the terminal wrote nothing"
            time.sleep(0.2)
        time.sleep(0.2)
        results["app"] = json.loads((env.home / "probe-app.json").read_text())
        shell = env.step(Action("shell", {"command": "python3 probe.py shell"}))
        assert shell.info["exit_code"] == 0, shell.info
        results["shell"] = json.loads(shell.info["output"].splitlines()[0])
        # the checker ran the probe too: 1.0 means nothing reached and the task's own file is there
        assert env.evaluate() == 1.0
        results["checker"] = json.loads((env.home / "probe-checker.json").read_text())
    for where, result in results.items():
        _assert_nothing_reached(where, result, reach, own_display=True)


@needs_desktop
def test_an_x_display_refuses_a_client_without_its_cookie(other_display, tmp_path):
    from Xlib.error import DisplayConnectionError

    from agent.envs.desktop.x11 import open_display, write_xauthority

    (tmp_path / "none").write_bytes(b"")
    with pytest.raises(DisplayConnectionError, match="Authorization required"):
        open_display(other_display.name, tmp_path / "none")
    write_xauthority(tmp_path / "wrong", secrets.token_bytes(16), other_display.number)
    with pytest.raises(DisplayConnectionError, match="Invalid MIT-MAGIC-COOKIE-1 key"):
        open_display(other_display.name, tmp_path / "wrong")
    connection = other_display.connect()  # the display's own cookie
    assert connection.screen().width_in_pixels == 1280
    connection.close()


# -- limits --------------------------------------------------------------------------------------------------------
BOMB = {"id": "fork-bomb", "instruction": "x", "evaluator": {"func": "infeasible"},
        # bash's fork bomb (a shell line runs by /bin/sh, as in OSWorld, where ':' cannot be a function's name)
        "config": [{"type": "execute", "parameters": {"command": ["bash", "-c", ":(){ :|:& };:"], "timeout": 3}}]}
HOG = {"id": "memory-hog", "instruction": "x", "evaluator": {"func": "infeasible"},
       "config": [{"type": "execute", "parameters": {"command": "python3 -c 'b = bytearray(1 << 30)'",
                                                     "shell": True}}]}
# a setup step that takes the window manager down as it fails (as a fork bomb can, at the process limit)
TAKES_DOWN = {"id": "takes-down", "instruction": "x", "evaluator": {"func": "infeasible"},
              "config": [{"type": "execute", "parameters": {"command": "pkill -ABRT -x openbox; sleep 30",
                                                            "shell": True, "timeout": 1}}]}
QUIET = {"id": "quiet", "instruction": "x", "evaluator": {"func": "infeasible"},
         "config": [{"type": "execute", "parameters": {"command": "echo fine > ~/fine.txt", "shell": True}}]}


@pytest.fixture(scope="module")
def limited_desktop():
    from agent.envs.desktop import DesktopEnv

    env = DesktopEnv(elements=False, limits=Limits(pids=96, memory_mb=384))
    for task in (BOMB, HOG, TAKES_DOWN, QUIET):
        env.add_task(copy.deepcopy(task))
    yield env
    env.close()


@pytest.fixture
def other_episode():
    """Another episode, running on while the limited one fails."""
    from agent.envs.terminal import TerminalEnv

    env = TerminalEnv()
    env.reset("terminal-hello", 0)
    yield env
    env.close()


def _goes_on(other_episode, limited_desktop) -> None:
    result = other_episode.step(Action("shell", {"command": "echo still here"}))
    assert result.info["exit_code"] == 0 and "still here" in result.observation.screen_text
    limited_desktop.reset("quiet", 0)  # the failed env's next episode starts as usual
    assert (limited_desktop.home / "fine.txt").read_text() == "fine\n"


@needs_desktop
def test_a_fork_bomb_in_a_setup_step_fails_its_episode_alone(limited_desktop, other_episode):
    # the bomb's first shell returns at once, its copies go on: the step fails when they hit the limit, or its time
    with pytest.raises(EnvError, match=r"could not set up fork-bomb: setup step 1 \(execute\): .* (ran over 3\.0 s and "
                                       r"was stopped; it hit|exited with code \d+ \(it hit) its process limit \(96 "
                                       r"processes"):
        limited_desktop.reset("fork-bomb", 0)
    _goes_on(other_episode, limited_desktop)


@needs_desktop
def test_a_setup_step_that_takes_the_desktop_down_is_named_as_the_cause(limited_desktop, other_episode):
    with pytest.raises(EnvError, match=r"could not set up takes-down: setup step 1 \(execute\): .* ran over 1\.0 s and "
                                       r"was stopped; and then the desktop's window manager \(openbox\) \(:\d+\) exited with "
                                       r"code -6; the episode is lost"):
        limited_desktop.reset("takes-down", 0)
    _goes_on(other_episode, limited_desktop)


@needs_desktop
def test_a_memory_hog_in_a_setup_step_fails_its_episode_alone(limited_desktop, other_episode):
    with pytest.raises(EnvError, match=r"could not set up memory-hog: setup step 1 \(execute\): .* exited with code "
                                       r"-?\d+ \(it ran out of memory \(its limit is 384 MB\)"):
        limited_desktop.reset("memory-hog", 0)
    _goes_on(other_episode, limited_desktop)


@needs_sandbox
def test_a_fork_bomb_in_the_terminal_fails_its_command_and_the_next_one_runs():
    from agent.envs.terminal import TerminalEnv

    with TerminalEnv(limits=Limits(pids=32), command_timeout_s=2.0) as env:
        env.reset("terminal-hello", 0)
        result = env.step(Action("shell", {"command": ":(){ :|:& };:"}))
        assert "ran over 2.0 s" in result.info["error"] and "process limit (32 processes" in result.info["error"]
        assert env.step(Action("shell", {"command": "echo next"})).info["exit_code"] == 0


@needs_sandbox
def test_a_terminal_command_cannot_fill_the_disk():
    from agent.envs.terminal import TerminalEnv

    places = ["/tmp", "/var/tmp", "/dev/shm"] + (["~"] if os.geteuid() == 0 else [])  # under root the home is its own
    with TerminalEnv(limits=Limits(disk_mb=8)) as env:
        env.reset("terminal-hello", 0)
        for place in places:
            result = env.step(Action("shell", {"command": f"head -c 20M /dev/zero > {place}/big"}))
            assert result.info["exit_code"] != 0 and "No space left on device" in result.observation.screen_text, place
        assert env.step(Action("shell", {"command": "rm ~/big; echo small > ~/small"})).info["exit_code"] == 0


@needs_sandbox
def test_a_terminal_command_reaches_none_of_loupe(targets):
    from agent.envs.terminal import TerminalEnv

    with TerminalEnv(command_timeout_s=20.0) as env:
        env.reset("terminal-hello", 0)
        shutil.copy(PROBE, env.workdir / "probe.py")
        (env.workdir / "probe-args.json").write_text(json.dumps(targets))
        result = env.step(Action("shell", {"command": "python3 probe.py terminal"}))
        assert result.info["exit_code"] == 0, result.observation.screen_text
        _assert_nothing_reached("terminal", json.loads((env.workdir / "probe-terminal.json").read_text()), targets)
        assert "probe done" in result.observation.screen_text


@needs_sandbox
def test_a_checkout_under_tmp_is_bound_back_read_only_with_its_data_still_hidden(monkeypatch, tmp_path):
    """CI may clone Loupe under /tmp, which every sandbox has its own of: its code (the sandbox's holder runs from it)
    is bound back read-only, and its data folder is hidden inside it all the same."""
    from agent.envs import sandbox
    from agent.envs.terminal import TerminalEnv

    checkout = tmp_path / "checkout"
    (checkout / ".data").mkdir(parents=True)
    (checkout / "code.txt").write_text("the code")
    (checkout / ".data" / "secret").write_text("the secret")
    monkeypatch.setattr(sandbox, "REPO", checkout)
    monkeypatch.delenv("LOUPE_DATA_DIR", raising=False)
    assert checkout in sandbox.code_paths()
    with TerminalEnv() as env:
        env.reset("terminal-hello", 0)
        seen = env.step(Action("shell", {"command": f"cat {checkout}/code.txt; cat {checkout}/.data/secret; "
                                                    f"touch {checkout}/new"}))
        text = seen.observation.screen_text
        assert "the code" in text and "the secret" not in text and seen.info["exit_code"] != 0, text
        assert not (checkout / "new").exists()


@pytest.fixture
def no_sandbox(monkeypatch):
    """This machine as one where bubblewrap cannot make namespaces (a container without the capability)."""
    from agent.envs import sandbox

    monkeypatch.setattr(sandbox, "_support", sandbox.Support(False, False, "", "bwrap: No permissions to creat"
                                                                                "e new namespace"))


def test_where_no_sandbox_can_be_made_desktop_and_terminal_tasks_are_refused_with_the_reason(no_sandbox):
    from agent.envs.desktop import DesktopEnv
    from agent.envs.terminal import TerminalEnv

    with DesktopEnv() as desktop:
        with pytest.raises(EnvError, match="desktop tasks need a sandbox, and none can be made here: bwrap: No "
                                           "permissions to create new namespace"):
            desktop.reset("desktop-mousepad-write", 0)
        assert desktop.desktop is None  # no display was started
    with TerminalEnv() as terminal:
        with pytest.raises(EnvError, match="no sandbox can be made on this machine: bwrap: No permissions"):
            terminal.reset("terminal-hello", 0)


def test_where_no_sandbox_can_be_made_a_miniwob_browser_runs_unconfined_as_before(no_sandbox):
    from agent.envs.miniwob import MiniWoBEnv

    with MiniWoBEnv() as env:
        obs = env.reset("click-test", 0)
        assert env.sandbox is None and obs.instruction == "Click the button."
        button = next(e for e in obs.elements if e.role == "button")
        assert env.step(Action("click", {"x": button.x, "y": button.y})).reward > 0


@pytest.mark.parametrize(("name", "value", "message"), [
    ("LOUPE_SANDBOX_MEMORY_MB", "2G", "LOUPE_SANDBOX_MEMORY_MB='2G' is not a whole number"),
    ("LOUPE_SANDBOX_PIDS", "0", "LOUPE_SANDBOX_PIDS='0' must be above 0"),
    ("LOUPE_SANDBOX_CPUS", "half", "LOUPE_SANDBOX_CPUS='half' is not a number"),
])
def test_a_bad_limit_setting_is_refused_naming_it(monkeypatch, name, value, message):
    from agent.envs.terminal import TerminalEnv

    monkeypatch.setenv(name, value)
    with pytest.raises(EnvError, match=message):
        TerminalEnv()
    monkeypatch.delenv(name)
    monkeypatch.setenv("LOUPE_SANDBOX_CPUS", "0.5")
    assert Limits.from_env() == Limits(cpus=0.5)


# -- browsers ------------------------------------------------------------------------------------------------------
_FETCH = """async (urls) => {
  const out = {};
  for (const url of urls) {
    try { await fetch(url, {mode: 'no-cors'}); out[url] = 'reached'; } catch (e) { out[url] = 'refused: ' + e; }
  }
  return out;
}"""


def _loupe_urls(targets: dict) -> list[str]:
    return [f"http://127.0.0.1:{port}/" for port in targets["ports"].values()]


@pytest.fixture(scope="module")
def team_app(tmp_path_factory):
    root = tmp_path_factory.mktemp("team")
    (root / "index.html").write_text("<html><body><h1>Team app</h1></body></html>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _browser_in_its_sandbox(env) -> None:
    pid = env.browser_pid
    assert pid and os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    if os.geteuid() == 0:
        assert os.stat(f"/proc/{pid}").st_uid == env.sandbox.uid != 0


@needs_sandbox
def test_the_webapp_browser_reaches_its_task_and_none_of_loupe(targets, team_app):
    from agent.envs.webapp import WebAppEnv
    from agent.envs.webapp.tasks import load_task

    urls = _loupe_urls(targets)
    env = WebAppEnv()
    try:
        env.tasks["team-probe"] = load_task({"task_id": "team-probe", "start_url": team_app + "/index.html",
                                             "instruction": "look", "check": {"type": "person"}})
        env.reset("team-probe", 0)  # an any-URL task: its own page, on the worker's loopback, loads
        _browser_in_its_sandbox(env)
        fetched = env._page.evaluate(_FETCH, [team_app + "/index.html", *urls])
        assert fetched.pop(team_app + "/index.html") == "reached"
        assert all(value.startswith("refused") for value in fetched.values()), fetched
        refused = " ".join(env._egress.refused)  # the proxy was asked, and said no
        assert all(f":{port} " in refused for port in targets["ports"].values()), refused
        env.reset("shop-category-url", 0)  # a shop task: its shop answers, nothing outside does
        fetched = env._page.evaluate(_FETCH, [env.sites["shop"] + "/", *urls])
        assert fetched.pop(env.sites["shop"] + "/") == "reached"
        assert all(value.startswith("refused") for value in fetched.values()), fetched
    finally:
        env.close()


@needs_sandbox
def test_the_miniwob_browser_reaches_its_pages_and_none_of_loupe(targets):
    from agent.envs.miniwob import MiniWoBEnv

    with MiniWoBEnv() as env:
        env.reset("click-test", 0)
        _browser_in_its_sandbox(env)
        fetched = env._page.evaluate(_FETCH, [env.base_url + "miniwob/click-test.html", *_loupe_urls(targets)])
        assert fetched.pop(env.base_url + "miniwob/click-test.html") == "reached"
        assert all(value.startswith("refused") for value in fetched.values()), fetched


_CHURN = r'''
import ctypes, shutil, sys, tempfile, threading
from pathlib import Path
from agent.envs.base import SandboxUnavailable
from agent.envs.sandbox import Sandbox
libc = ctypes.CDLL(None, use_errno=True)
base, stop, failed = Path(tempfile.mkdtemp(prefix="loupe-churn-")), threading.Event(), []
for n in range(40):  # a host with mounts to copy, as a busy worker's is (its sandboxes' homes)
    (base / f"s{n}").mkdir()
    libc.mount(b"churn", str(base / f"s{n}").encode(), b"tmpfs", 0, b"size=1m")
def churn(k):  # other sandboxes' homes, mounted and unmounted as their episodes start and end
    n = 0
    while not stop.is_set():
        (base / f"c{k}-{n % 8}").mkdir(exist_ok=True)
        libc.mount(b"churn", str(base / f"c{k}-{n % 8}").encode(), b"tmpfs", 0, b"size=1m")
        libc.umount2(str(base / f"c{k}-{n % 8}").encode(), 2)
        n += 1
for k in range(2):
    threading.Thread(target=churn, args=(k,), daemon=True).start()
for n in range(int(sys.argv[1])):
    home = Path(tempfile.mkdtemp(prefix="loupe-race-home-"))
    sandbox = Sandbox(f"loupe-race-{n}", binds=[home])
    try:
        sandbox.start()
    except SandboxUnavailable as exc:
        failed.append(str(exc))
    finally:
        sandbox.close()
        shutil.rmtree(home, ignore_errors=True)
stop.set()
print(len(failed), failed[:1])
'''


@needs_sandbox
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_sandboxes_start_while_other_homes_are_mounted_and_unmounted_on_a_shared_host():
    import subprocess
    import sys

    # a mount namespace of its own whose mounts propagate, as a host's shared / does: bwrap then sees mounts vanish
    # while it copies them (here 3 starts in 40 failed before a start was tried again)
    result = subprocess.run(["unshare", "-m", "--propagation", "shared", sys.executable, "-c", _CHURN, "120"],
                            capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().startswith("0 "), result.stdout
