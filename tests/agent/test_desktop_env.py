"""The desktop env on a real Xvfb: input lands, screenshots, reset leaves no trace, OSWorld tasks
score 0 untouched and 1 after their scripted solution, bad task files and bad actions are refused."""

from __future__ import annotations

import copy
import io
import json
import os
import shutil
import signal
import time

import pytest
from PIL import Image

from agent.actions import Action
from agent.envs import EnvError, make_env, tasks_for
from agent.envs.desktop import DESKTOP_TASKS, DesktopEnv, OSWorldTask, TaskFormatError, load_task
from agent.envs.desktop.solutions import SOLUTIONS, solution_for

pytestmark = pytest.mark.skipif(shutil.which("Xvfb") is None or shutil.which("openbox") is None,
                                reason="needs xvfb and openbox (make test-tools installs them)")

SCRATCH = OSWorldTask(id="scratch", instruction="Nothing to do.", config=[], evaluator={"func": "infeasible"},
                      infeasible=True)


@pytest.fixture(scope="module")
def env():
    """One desktop for the module: episodes reset the session, not the display."""
    environment = make_env("desktop", tasks={"scratch": SCRATCH})
    yield environment
    environment.close()


def _play(env: DesktopEnv, actions: list[Action]):
    result = None
    for action in actions:
        result = env.step(action)
    return result


def test_desktop_is_registered_with_its_tasks():
    assert isinstance(make_env("desktop"), DesktopEnv)
    assert set(tasks_for("desktop")) == set(DESKTOP_TASKS) and len(DESKTOP_TASKS) >= 8
    assert set(SOLUTIONS) == set(DESKTOP_TASKS)


def test_screenshot_is_a_jpeg_of_the_whole_screen(env):
    obs = env.reset("desktop-mousepad-write", 0)
    image = Image.open(io.BytesIO(obs.screenshot))
    assert image.format == "JPEG" and image.size == (obs.width, obs.height) == (1280, 720)
    assert obs.url == "desktop://desktop-mousepad-write" and obs.instruction.startswith("Write")
    assert any(element.role == "menu" and element.text == "File" for element in obs.elements)


def test_typing_and_a_held_hotkey_land_in_mousepad_and_save_the_file(env):
    env.reset("desktop-mousepad-write", 0)
    _play(env, [Action("type", {"text": "Zoë's line: 1+1=2"}), Action("hotkey", {"keys": "ctrl+s"})])
    assert (env.home / "notes.txt").read_text().startswith("Zoë's line: 1+1=2")


def test_clicks_land_on_the_calculator_buttons_it_reads_from_atspi(env):
    obs = env.reset("desktop-calc-multiply", 0)
    buttons = {e.text: e for e in obs.elements if e.role == "toggle button"}
    for label in ("7", "*", "6", "="):
        obs = env.step(Action("click", {"x": buttons[label].x, "y": buttons[label].y})).observation
    assert any(e.role == "text" and e.text == "42" for e in obs.elements)


def test_reset_leaves_no_trace_of_the_previous_episode(env):
    env.reset("desktop-terminal-greeting", 0)
    old_home = env.home
    _play(env, [Action("type", {"text": "echo secret > ~/left.txt; sleep 300 &\n"}), Action("wait", {})])
    assert (old_home / "left.txt").read_text() == "secret\n"
    old_pids = {process.pid for process in env.desktop.session_processes()}
    env.reset("desktop-terminal-greeting", 1)
    assert env.home != old_home and not old_home.exists() and not (env.home / "left.txt").exists()
    assert not old_pids & {process.pid for process in env.desktop.session_processes()}
    assert "left.txt" not in env.desktop.run("ls -a ~", shell=True).stdout.split()
    assert "sleep" not in {process.name() for process in env.desktop.session_processes()}


def test_sessions_run_under_their_own_uid_when_root(env):
    if os.geteuid() != 0:
        pytest.skip("a per-desktop uid needs root")
    env.reset("scratch", 0)
    assert env.desktop.uid != 0
    result = env.desktop.run("id -u; id -un; echo $HOME", shell=True)
    assert result.stdout.split() == [str(env.desktop.uid), f"loupe{env.desktop.number}", str(env.home)]
    assert all(process.uids().real == env.desktop.uid for process in env.desktop.session_processes())


def test_ending_a_session_leaves_alone_what_another_session_of_the_same_uid_runs(env):
    """The uid comes from the display number, which a desktop whose X server died frees before its session is
    ended: another desktop on that number (another worker's) runs under the same uid. Ending the dead one's session
    killed the other's openbox; now only processes with its own tag, or with none, are its to kill."""
    import subprocess

    from agent.envs.desktop.session import _TAG

    if os.geteuid() != 0:
        pytest.skip("a per-desktop uid needs root")
    env.reset("scratch", 0)
    uid = env.desktop.uid

    def sleeper(**tag):
        return subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "sleep", "60"],
                                env={"PATH": os.environ["PATH"], **tag})
    others, untagged = sleeper(**{_TAG: "another-desktops-session"}), sleeper()
    try:
        time.sleep(0.3)
        env.reset("scratch", 1)  # ends the session
        assert untagged.wait(timeout=5) == -signal.SIGKILL  # a leftover of the uid: killed
        assert others.poll() is None  # someone else's: alive
    finally:
        others.kill()
        untagged.kill()
        others.wait()


NEEDS_ELEMENTS = {"desktop-calc-multiply"}  # its solution clicks the buttons the AT-SPI walk found


@pytest.fixture(scope="module")
def quick_env():
    """A desktop whose steps skip the AT-SPI walk (evaluators still walk where they check the screen)."""
    environment = make_env("desktop", elements=False)
    yield environment
    environment.close()


def test_the_shipped_tasks_cover_files_terminal_editor_calculator_and_spreadsheet():
    apps = {app for task in DESKTOP_TASKS.values() for app in task.raw.get("related_apps", [])}
    assert len(DESKTOP_TASKS) >= 15
    assert {"files", "terminal", "mousepad", "galculator", "spreadsheet"} <= apps


@pytest.mark.parametrize("task_id", sorted(DESKTOP_TASKS))
def test_each_task_scores_0_untouched_and_1_after_its_solution(env, quick_env, task_id):
    used = env if task_id in NEEDS_ELEMENTS else quick_env
    obs = used.reset(task_id, 0)
    assert used.evaluate(answer="") == 0.0
    result = _play(used, solution_for(task_id, obs))
    assert result.done and result.reward == 1.0


def test_saying_fail_scores_0_on_a_feasible_task(env):
    env.reset("desktop-mousepad-write", 0)
    _play(env, [Action("type", {"text": "Meeting at noon"}), Action("hotkey", {"keys": "ctrl+s"})])
    assert env.evaluate() == 1.0 and env.evaluate(answer="FAIL") == 0.0


def test_an_action_outside_the_screen_does_nothing_and_says_why_and_the_episode_goes_on(env):
    env.reset("scratch", 0)
    result = env.step(Action("click", {"x": 1280, "y": 5}))
    assert result.info["error"] == "click at (1280, 5) is outside the 1280x720 screen" and not result.done
    assert env.step(Action("drag", {"x1": 5, "y1": 5, "x2": 10, "y2": -1})).info["error"].startswith(
        "drag at (10, -1) is outside")
    assert env.step(Action("type", {"text": "still here"})).info.get("error") is None  # the episode went on
    assert env.step(Action("hotkey", {"keys": "ctrl+nosuchkey"})).info["error"].startswith("unknown key 'nosuchkey'")


def _task(**changes) -> dict:
    data = copy.deepcopy(DESKTOP_TASKS["desktop-mousepad-json"].raw)
    data.update(changes)
    return data


@pytest.mark.parametrize(("change", "message"), [
    ({"evaluator": {"func": "exact_match", "result": {"type": "vm_screen_size"},
                    "expected": {"type": "rule", "rules": {}}}}, "unsupported getter 'vm_screen_size'"),
    ({"evaluator": {"func": "compare_pptx_files", "result": {"type": "vm_file", "path": "/home/user/a"}}},
     "unsupported metric 'compare_pptx_files'"),
    ({"config": [{"type": "googledrive", "parameters": {}}]}, "googledrive step puts files in a Google Drive account"),
    ({"config": [{"type": "frobnicate", "parameters": {}}]}, "unsupported setup step 'frobnicate'"),
    ({"config": [{"type": "download", "parameters": {"files": [{"url": "https://x/a.txt", "path": "C:\\a.txt"}]}}]},
     "is a Windows path; this desktop is Linux"),
    ({"evaluator": {"func": "exact_match", "result": {"type": "vm_file", "path": "/etc/shadow"},
                    "expected": {"type": "rule", "rules": {}}}}, "must lie in the VM's home"),
    ({"evaluator": {"func": ["exact_match", "fuzzy_match"], "result": [{"type": "rule", "rules": {}}],
                    "expected": [{"type": "rule", "rules": {}}] * 2}}, "result has 1 entries for 2 funcs"),
    ({"hybrid": "yes"}, "hybrid must be true or false, got 'yes'"),
    ({"config": [{"type": "upload_file", "parameters": {"files": [{"local_path": "nope.xlsx",
                                                                   "path": "/home/user/a.xlsx"}]}}]},
     r"upload_file\): no file 'nope.xlsx' in the local cache"),
    ({"config": [{"type": "upload_file", "parameters": {"files": [{"local_path": "todo.txt",
                                                                   "path": "/etc/cron.d/x"}]}}]},
     "must lie in the VM's home"),
    ({"evaluator": {"func": "compare_table", "result": {"type": "vm_file", "path": "/home/user/a.xlsx"},
                    "expected": {"type": "cache_file", "path": "../env.py"},
                    "options": {"rules": [{"type": "sheet_name"}]}}}, r"no file '../env.py' in the local cache"),
    ({"evaluator": {"func": "compare_table", "result": {"type": "vm_file", "path": "/home/user/a.xlsx"},
                    "options": {"rules": [{"type": "pivot_table", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}}},
     "unsupported compare_table rule 'pivot_table'"),
    ({"evaluator": {"func": "compare_table", "result": {"type": "vm_file", "path": "/home/user/a.xlsx"},
                    "options": {"rules": [{"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]}}},
     "rule sheet_data compares with evaluator.expected, which is missing"),
    ({"evaluator": {"func": "compare_table", "result": {"type": "vm_file", "path": "/home/user/a.xlsx"},
                    "options": {"rules": [{"type": "check_cell", "coordinate": "A1",
                                           "props": {"font_bold": {"method": "eq", "ref": True}}}]}}},
     "only a cell's value is checked"),
])
def test_an_osworld_file_using_what_is_unsupported_is_refused_by_name(tmp_path, change, message):
    from agent.envs.desktop import load_task_file

    path = tmp_path / "task.json"
    path.write_text(json.dumps(_task(**change)))
    with pytest.raises(TaskFormatError, match=message) as caught:
        load_task_file(path)
    assert "desktop-mousepad-json" in str(caught.value) and str(path) in str(caught.value)


def test_a_failing_setup_command_goes_on_as_in_osworld_but_a_step_past_its_limit_or_without_its_window_names_itself():
    failing = load_task({"id": "bad-setup", "instruction": "x", "config": [
        {"type": "execute", "parameters": {"command": "echo broken >&2; exit 3", "shell": True}},
        {"type": "execute", "parameters": {"command": "echo after > ~/after.txt", "shell": True}}],
        "evaluator": {"func": "infeasible"}})
    slow = load_task({"id": "slow-setup", "instruction": "x", "config": [
        {"type": "execute", "parameters": {"command": "sleep 0.1"}},
        {"type": "execute", "parameters": {"command": "sleep 30", "timeout": 1}}], "evaluator": {"func": "infeasible"}})
    windowless = load_task({"id": "no-window", "instruction": "x", "config": [
        {"type": "launch", "parameters": {"command": ["sleep", "30"]}}], "evaluator": {"func": "infeasible"}})
    with DesktopEnv(tasks={"bad-setup": failing, "slow-setup": slow, "no-window": windowless}) as env:
        env.reset("bad-setup", 0)  # OSWorld's setup ignores a command's exit code: the next step ran
        assert (env.home / "after.txt").read_text() == "after\n"
        assert any("setup step 1 (execute): 'echo broken >&2; exit 3' exited with code 3: broken" in note
                   for note in env.desktop.notes)
        with pytest.raises(EnvError, match=r"could not set up slow-setup: setup step 2 \(execute\): 'sleep 30' ran "
                                           r"over 1.0 s and was stopped"):
            env.reset("slow-setup", 0)
        from agent.envs.desktop import osworld

        started = time.monotonic()
        with pytest.raises(EnvError, match=r"opened no window in 1 s"):
            osworld.run_setup(windowless.config, env.desktop, window_timeout_s=1.0)
        assert time.monotonic() - started < 5
        with pytest.raises(EnvError, match="unknown desktop task 'nope'"):
            env.reset("nope", 0)


def test_a_killed_x_server_ends_the_episode_with_an_env_error():
    with DesktopEnv(tasks={"scratch": SCRATCH}) as env:
        env.reset("scratch", 0)
        os.kill(env.desktop.xvfb_pid, signal.SIGKILL)
        time.sleep(0.2)
        with pytest.raises(EnvError, match=r"X server \(Xvfb :\d+\) exited .*next reset\(\) starts a new desktop"):
            env.step(Action("click", {"x": 10, "y": 10}))
        assert env.desktop is None
        assert env.reset("scratch", 0).width == 1280  # a new desktop


def _book(path, rows, title="Sales"):
    import openpyxl

    book = openpyxl.Workbook()
    book.active.title = title
    for row in rows:
        book.active.append(row)
    book.save(path)
    return str(path)


def test_compare_table_checks_cells_and_sheet_data_through_openpyxl(tmp_path):
    from agent.envs.desktop.osworld import compare_table

    result = _book(tmp_path / "r.xlsx", [("North", 120), ("South", 95.00001), (None, 215)])
    golden = _book(tmp_path / "e.xlsx", [("North", 120), ("South", 95)], title="Golden")
    cell = [{"type": "check_cell", "sheet_idx": "RNSales", "coordinate": "B3", "props": {"value": {"ref": 215}}}]
    assert compare_table(result, None, rules=cell) == 1.0
    cell[0]["props"]["value"]["ref"] = 216
    assert compare_table(result, None, rules=cell) == 0.0
    data = [{"type": "sheet_data", "sheet_idx0": "RI0", "sheet_idx1": "EI0"}]
    assert compare_table(_book(tmp_path / "same.xlsx", [("North", 120), ("South", 95.00001)]), golden, rules=data) == 1.0
    assert compare_table(result, golden, rules=data) == 0.0  # a row more
    assert compare_table(result, golden, rules=[{"type": "sheet_name"}]) == 0.0
    (tmp_path / "broken.xlsx").write_text("not a workbook")
    assert compare_table(str(tmp_path / "broken.xlsx"), golden, rules=data) == 0.0
    assert compare_table(None, golden, rules=data) == 0.0
    missing_sheet = [{"type": "check_cell", "sheet_idx": 3, "coordinate": "A1", "props": {"value": {"ref": 1}}}]
    assert compare_table(result, None, rules=missing_sheet) == 0.0


# -- authored tasks: given as their JSON (the Tasks page, tasks_import), handed to the env by the rollout worker --
AUTHORED = {
    "id": "authored-copy-draft", "instruction": "Copy draft.txt to done.txt in your home folder.", "hybrid": True,
    "config": [{"type": "execute", "parameters": {"command": "echo 'first draft' > ~/draft.txt", "shell": True}}],
    "evaluator": {"func": "check_include_exclude", "result": {"type": "vm_command_line", "command": "cat ~/done.txt",
                                                              "shell": True},
                  "expected": {"type": "rule", "rules": {"include": ["first draft"]}}},
}


def test_an_authored_task_runs_its_setup_and_scores_0_untouched_and_1_after_its_solution(quick_env):
    assert quick_env.add_task(copy.deepcopy(AUTHORED)) == "authored-copy-draft"
    quick_env.reset("authored-copy-draft", 0)
    assert (quick_env.home / "draft.txt").read_text() == "first draft\n"  # its config ran
    assert quick_env.evaluate(answer="") == 0.0
    result = _play(quick_env, [Action("shell", {"command": "cp draft.txt done.txt"}),
                               Action("finished", {"answer": ""})])
    assert result.done and result.reward == 1.0


def test_an_authored_task_is_refused_naming_what_it_uses_or_the_shipped_id_it_takes():
    env = DesktopEnv()  # no desktop starts before a reset
    cloud = {**AUTHORED, "evaluator": {**AUTHORED["evaluator"], "result": {"type": "vm_screen_size"}}}
    with pytest.raises(TaskFormatError, match="unsupported getter 'vm_screen_size' in evaluator.result"):
        env.add_task(cloud)
    with pytest.raises(TaskFormatError, match="the id of a shipped task"):
        env.add_task({**AUTHORED, "id": "desktop-mousepad-write"})
    assert env.add_task(copy.deepcopy(DESKTOP_TASKS["desktop-mousepad-write"].raw)) == "desktop-mousepad-write"


def test_live_frames_follow_the_screen_and_are_encoded_only_when_it_changed(env):
    env.reset("scratch", 0)
    first = env.live_frame()
    assert (first.width, first.height) == (1280, 720)
    assert Image.open(io.BytesIO(first.jpeg)).size == (1280, 720)
    assert env.live_frame() is first  # the same pixels: not encoded again
    x = env.desktop.connect()  # another program (with the display's cookie) draws on the screen: no step is taken
    try:
        screen = x.screen()
        red = screen.default_colormap.alloc_color(65535, 0, 0).pixel
        window = screen.root.create_window(100, 100, 400, 300, 0, screen.root_depth, background_pixel=red,
                                           override_redirect=True)
        window.map()
        x.sync()
        deadline = time.monotonic() + 5
        while (frame := env.live_frame()) is first and time.monotonic() < deadline:
            time.sleep(0.05)
        r, g, b = Image.open(io.BytesIO(frame.jpeg)).convert("RGB").getpixel((300, 250))
        assert r > 200 and g < 60 and b < 60
    finally:
        x.close()
    env.live_stop()


def test_the_desktop_shows_its_menu_hint_and_the_menu_offers_apps_but_no_way_to_end_the_session(env):
    """The empty desktop is not a black screen: it says a right-click opens the menu (issue 33), and the menu openbox
    shows there holds the apps, no Exit, Restart or Reconfigure (which would end the episode's session)."""
    import re

    from agent.envs.desktop.session import BACKGROUND

    obs = env.reset("scratch", 0)
    before = Image.open(io.BytesIO(obs.screenshot)).convert("RGB")
    assert all(abs(a - b) < 12 for a, b in zip(before.getpixel((900, 300)), BACKGROUND))
    hint = before.crop((300, 640, 980, 700))  # the hint, in light letters low in the middle
    assert max(max(pixel) for pixel in hint.getdata()) > 200
    rc = (env.desktop.runtime / "openbox-rc.xml").read_text()
    assert re.findall(r"<file>(.*?)</file>", rc) == [str(env.desktop.runtime / "openbox-menu.xml")]
    menu = (env.desktop.runtime / "openbox-menu.xml").read_text()
    actions = set(re.findall(r'<action name="(\w+)"', menu))
    assert actions == {"Execute"} and {"xterm", "mousepad", "pcmanfm"} <= set(re.findall(r"<execute>(\w+)", menu))
    after = env.step(Action("right_click", {"x": 900, "y": 300})).observation  # openbox draws its menu there
    shown = Image.open(io.BytesIO(after.screenshot)).convert("RGB").crop((900, 300, 1000, 340))
    assert any(abs(a - b) > 40 for pixel in shown.getdata() for a, b in zip(pixel, BACKGROUND))
    env.step(Action("hotkey", {"keys": "escape"}))
