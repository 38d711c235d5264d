"""OSWorld-format tasks the test writes, run on the real desktop (Xvfb, openbox, the sandbox): what OSWorld's own
files lean on most, pyautogui and sudo in setup steps, ctrl+alt+t's terminal read by vm_terminal_output, a file from
the project's store, and Chromium driven over DevTools (chrome_open_tabs, open_tabs_info)."""

from __future__ import annotations

import shutil

import pytest

from agent.actions import Action
from agent.envs.desktop import DesktopEnv
from agent.envs.desktop.programs import OSWORLD_PYTHON

pytestmark = pytest.mark.skipif(shutil.which("Xvfb") is None, reason="the desktop's packages are not installed")

URL = "https://drive.usercontent.google.com/download?id=1setup&export=download"
TERMINAL = {
    "id": "terminal-size", "instruction": "Show the terminal's size.",
    "config": [
        {"type": "download", "parameters": {"files": [{"url": URL, "path": "setup.sh"}]}},
        {"type": "execute", "parameters": {"command": "echo password | sudo -S mkdir ~/Desktop/done && bash setup.sh",
                                           "shell": True}},
        {"type": "execute", "parameters": {"command": [
            "python", "-c", "import pyautogui, time; pyautogui.click(640, 360); pyautogui.hotkey('ctrl', 'alt', 't'); "
                            "time.sleep(1.5); pyautogui.write('cat ~/Desktop/done/size.txt'); pyautogui.press('enter');"
                            " time.sleep(0.5)"]}},
        {"type": "activate_window", "parameters": {"window_name": "Terminal"}},
    ],
    "evaluator": {"func": "check_include_exclude", "result": {"type": "vm_terminal_output"},
                  "expected": {"type": "rule", "rules": {"include": ["43 132"], "exclude": ["No such file"]}}},
}
TABS = {
    "id": "two-tabs", "instruction": "Keep the two tabs open.",
    "config": [
        {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}},
        {"type": "launch", "parameters": {"command": ["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]}},
        {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["http://127.0.0.1:9/one", "http://127.0.0.1:9/two"]}},
        {"type": "activate_window", "parameters": {"window_name": "Google Chrome"}},
    ],
    "evaluator": {"func": "is_expected_tabs", "result": {"type": "open_tabs_info"},
                  "expected": {"type": "rule", "rules": {"type": "url", "urls": ["http://127.0.0.1:9/one",
                                                                                 "http://127.0.0.1:9/two"]}}},
}


@pytest.mark.skipif(not OSWORLD_PYTHON.exists(), reason="the desktop's python3 with pyautogui is missing (make env-tools)")
def test_pyautogui_sudo_a_stored_file_and_the_terminal_as_osworld_tasks_use_them(tmp_path):
    script = tmp_path / "setup.sh"
    script.write_text("echo '43 132' > ~/Desktop/done/size.txt\n")
    with DesktopEnv() as env:
        env.add_task(TERMINAL, files={(URL, ""): str(script)})
        env.reset("terminal-size", 0)
        assert not env.desktop.notes, env.desktop.notes  # each step ran: sudo made the folder, python found pyautogui
        assert (env.home / "Desktop" / "done" / "size.txt").read_text() == "43 132\n"
        assert any(w.title == "Terminal" for w in env.desktop.windows())
        result = env.step(Action("finished", {"answer": ""}))
        assert result.done and result.reward == 1.0  # what the terminal shows, as OSWorld reads it


@pytest.mark.skipif(shutil.which("chromium") is None or shutil.which("socat") is None,
                    reason="chromium or socat is not installed (make env-tools)")
def test_chrome_tabs_are_opened_and_read_over_devtools_inside_the_sandbox():
    with DesktopEnv() as env:
        env.add_task(TABS)
        env.reset("two-tabs", 0)
        assert env.evaluate(answer="") == 1.0
        env.desktop.run(["python3", str(env.desktop.runtime / "chrome_helper.py"), "close",
                         '{"urls": ["http://127.0.0.1:9/two"]}'])
        assert env.evaluate(answer="") == 0.0
