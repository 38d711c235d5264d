"""The warm desktop pool on real Xvfb displays: an episode gets a ready desktop, nothing of one episode is
visible to the next, a desktop that died is replaced, and closing leaves no X server behind."""

from __future__ import annotations

import os
import shutil
import signal
import time

import psutil
import pytest

from agent.actions import Action
from agent.envs import EnvError
from agent.envs.desktop import DesktopEnv, OSWorldTask

pytestmark = pytest.mark.skipif(shutil.which("Xvfb") is None or shutil.which("openbox") is None,
                                reason="needs xvfb and openbox (make test-tools installs them)")

SCRATCH = OSWorldTask(id="scratch", instruction="Nothing to do.", config=[], evaluator={"func": "infeasible"},
                      infeasible=True)


def _own_xvfb() -> list[psutil.Process]:
    """The X servers this test process started (other tests and benches may run desktops beside it)."""
    return [p for p in psutil.Process().children(recursive=True) if p.name() == "Xvfb" and p.status() != "zombie"]


def _wait_ready(env: DesktopEnv, count: int = 1, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while env.pool.ready_count() < count:
        assert time.monotonic() < deadline, "the pool made no desktop ready in time"
        time.sleep(0.05)


@pytest.fixture
def pooled():
    env = DesktopEnv(pool=1, elements=False, settle_s=0.0, tasks={"scratch": SCRATCH})
    yield env
    env.close()
    assert not _own_xvfb(), "the pool left an X server running"


def test_a_file_written_in_one_episode_is_absent_in_the_next(pooled):
    pooled.reset("scratch", 0)
    first, first_home, first_uid = pooled.desktop, pooled.home, pooled.desktop.uid
    pooled.desktop.run("echo secret > ~/left.txt", shell=True)
    pooled.desktop.popen(["sleep", "300"])
    assert (first_home / "left.txt").read_text() == "secret\n"
    _wait_ready(pooled)
    pooled.reset("scratch", 1)  # another desktop: its own display, HOME (and uid under root)
    assert pooled.desktop is not first and pooled.home != first_home
    if os.geteuid() == 0:
        assert pooled.desktop.uid != first_uid
    assert "left.txt" not in pooled.desktop.run("ls -a ~", shell=True).stdout.split()
    _wait_ready(pooled)  # the first desktop, recycled: its session killed, its HOME deleted
    pooled.reset("scratch", 2)
    assert pooled.desktop is first and pooled.home != first_home and not first_home.exists()
    assert "left.txt" not in pooled.desktop.run("ls -a ~", shell=True).stdout.split()
    assert "sleep" not in {process.name() for process in pooled.desktop.session_processes()}


def test_a_warm_desktop_is_handed_over_without_starting_a_session(pooled):
    pooled.reset("scratch", 0)
    _wait_ready(pooled)
    started = time.monotonic()
    obs = pooled.reset("scratch", 1)
    assert time.monotonic() - started < 1.0  # measured in `python -m bench env`; here: nothing was started
    assert (obs.width, obs.height) == (1280, 720) and pooled.desktop.windows() == []


def test_a_desktop_that_died_waiting_or_mid_episode_is_replaced(pooled):
    pooled.reset("scratch", 0)
    _wait_ready(pooled)
    waiting = pooled.pool._ready.queue[0]
    os.kill(waiting.xvfb_pid, signal.SIGKILL)
    time.sleep(0.2)
    pooled.reset("scratch", 1)  # the dead one is skipped: the episode gets the recycled or a new desktop
    assert pooled.desktop is not waiting
    pooled.desktop.check_alive()
    os.kill(pooled.desktop.xvfb_pid, signal.SIGKILL)
    time.sleep(0.2)
    with pytest.raises(EnvError, match=r"X server \(Xvfb :\d+\) exited"):
        pooled.step(Action("click", {"x": 10, "y": 10}))
    assert pooled.reset("scratch", 2).width == 1280
    pooled.desktop.check_alive()


def test_a_pool_size_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1 desktop, got 0"):
        from agent.envs.desktop.pool import DesktopPool

        DesktopPool(0)
