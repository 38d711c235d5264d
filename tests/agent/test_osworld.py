"""OSWorld's task format as it is (agent/envs/desktop/osworld.py, osworld_getters.py, programs.py): every problem of
a file listed, the files a task downloads, person-judged and infeasible tasks, and the getters and setup steps on
a stand-in desktop (folders the test makes; commands run here, unconfined). The real desktop's runs are in
test_desktop_env.py and test_osworld_desktop.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agent.envs.base import EnvError
from agent.envs.desktop import osworld
from agent.envs.desktop.osworld import TaskFormatError, evaluate_task, load_task, run_setup
from agent.envs.desktop.osworld_getters import get_state, terminal_text
from agent.envs.desktop.programs import SUDO, session_programs

URL = "https://drive.usercontent.google.com/download?id=1abc&export=download"


class StandIn:
    """What the getters and setup steps use of a Desktop: a HOME, a runtime folder, commands, notes."""

    def __init__(self, root: Path) -> None:
        self.home, self.runtime = root / "home", root / "run"
        self.home.mkdir()
        self.runtime.mkdir()
        self.notes: list[str] = []
        self.uid = 0

    def run(self, argv, *, shell=False, timeout_s=30.0):
        try:
            return subprocess.run(argv, shell=shell, cwd=self.home, capture_output=True, text=True, timeout=timeout_s,
                                  env={"HOME": str(self.home), "PATH": "/usr/bin:/bin"})
        except subprocess.TimeoutExpired:
            raise EnvError(f"{argv!r} ran over {timeout_s:g} s and was stopped") from None

    def breach(self):
        return ""


@pytest.fixture
def desktop(tmp_path):
    return StandIn(tmp_path)


def task(**changes) -> dict:
    data = {"id": "t-1", "instruction": "Do it.", "config": [],
            "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "echo hi"},
                          "expected": {"type": "rule", "rules": {"expected": "hi\n"}}}}
    data.update(changes)
    return data


def test_a_file_with_several_problems_lists_them_all_naming_each_step_getter_and_metric():
    bad = task(config=[{"type": "googledrive", "parameters": {}},
                       {"type": "download", "parameters": {"files": [{"url": URL, "path": "C:\\Users\\user\\a.xlsx"}]}},
                       {"type": "launch", "parameters": {}}],
               evaluator={"func": ["compare_pptx_files", "exact_match"],
                          "result": [{"type": "vm_file", "path": "/etc/passwd"}, {"type": "vm_screen_size"}],
                          "expected": [{"type": "rule", "rules": {}}, {"type": "rule", "rules": {}}]})
    with pytest.raises(TaskFormatError) as caught:
        load_task(bad, origin="bad.json")
    problems = caught.value.problems
    assert len(problems) == 6 and all(p.startswith("OSWorld task t-1 (bad.json): ") for p in problems)
    text = str(caught.value)
    assert text.startswith("OSWorld task t-1 (bad.json): 6 problems: (1) config step 1: the googledrive step")
    for part in ("config step 2 (download): path 'C:\\\\Users\\\\user\\\\a.xlsx' is a Windows path",
                 "config step 3 (launch) needs command", "unsupported metric 'compare_pptx_files'",
                 "path '/etc/passwd' must lie in the VM's home", "unsupported getter 'vm_screen_size'"):
        assert part in text, part


def test_a_task_knows_the_files_it_downloads_and_the_programs_it_starts():
    loaded = load_task(task(
        config=[{"type": "download", "parameters": {"files": [{"url": URL, "path": "/home/user/Desktop/a.xlsx"},
                                                              {"url": URL + "2", "path": "setup.sh"}]}},
                {"type": "launch", "parameters": {"command": ["gimp", "/home/user/Desktop/a.png"]}},
                {"type": "open", "parameters": {"path": "/home/user/Desktop/a.xlsx"}}],
        evaluator={"func": "compare_table", "result": {"type": "vm_file", "path": "/home/user/Desktop/a.xlsx"},
                   "expected": {"type": "cloud_file", "path": URL + "gold", "dest": "gold.xlsx"},
                   "options": {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}}))
    assert [(f.url, f.path, f.name) for f in loaded.files] == [
        (URL, "/home/user/Desktop/a.xlsx", "a.xlsx"), (URL + "2", "/home/user/setup.sh", "setup.sh"),
        (URL + "gold", "gold.xlsx", "gold.xlsx")]
    assert loaded.programs == ("gimp", "libreoffice")
    assert [f.name for f in osworld.missing_files(loaded, {(URL, ""): "/x"})] == ["setup.sh", "gold.xlsx"]
    assert osworld.find_file({(URL, "/home/user/Desktop/a.xlsx"): "/exact", (URL, ""): "/any"}, URL,
                             "/home/user/Desktop/a.xlsx") == "/exact"


def test_an_empty_evaluator_is_judged_by_a_person_and_infeasible_scores_the_fail_answer(desktop):
    person = load_task(task(evaluator={"func": "", "result": {}, "expected": {}}))
    assert person.person and evaluate_task(person, desktop, answer="done") is None
    infeasible = load_task(task(evaluator={"func": "infeasible"}))
    assert evaluate_task(infeasible, desktop, answer="FAIL") == 1.0
    assert evaluate_task(infeasible, desktop, answer="") == 0.0 and evaluate_task(infeasible, desktop, answer=None) == 0
    feasible = load_task(task())
    assert evaluate_task(feasible, desktop, answer="") == 1.0 and evaluate_task(feasible, desktop, answer="FAIL") == 0


def test_download_copies_the_stored_file_and_a_missing_one_is_named(desktop, tmp_path):
    stored = tmp_path / "stored.sh"
    stored.write_text("echo 54\n")
    steps = [{"type": "download", "parameters": {"files": [{"url": URL, "path": "setup.sh"}]}}]
    run_setup(steps, desktop, files={(URL, ""): str(stored)})
    assert (desktop.home / "setup.sh").read_text() == "echo 54\n"
    with pytest.raises(EnvError, match=r"setup step 1 \(download\): the file setup.sh .* is not in the project's file "
                                       "store"):
        run_setup(steps, desktop, files={})


def test_an_execute_steps_stdout_is_the_cache_file_a_check_reads_and_a_failing_command_goes_on(desktop):
    loaded = load_task(task(
        config=[{"type": "execute", "parameters": {"command": "exit 4", "shell": True}},
                {"type": "execute", "parameters": {"command": ["ls", "-R", "/home/user/Mail"], "stdout": "mail.ls"}}],
        evaluator={"func": "check_list", "result": {"type": "cache_file", "path": "mail.ls"},
                   "expected": {"type": "rule", "rules": {"expect": [r"COMPANY\.msf"]}}}))
    (desktop.home / "Mail").mkdir()
    run_setup(loaded.config, desktop)
    assert desktop.notes == ["setup step 1 (execute): 'exit 4' exited with code 4: "]
    assert evaluate_task(loaded, desktop, answer="") == 0.0
    (desktop.home / "Mail" / "COMPANY.msf").write_text("")
    run_setup(loaded.config, desktop)
    assert evaluate_task(loaded, desktop, answer="") == 1.0
    with pytest.raises(TaskFormatError, match="no file 'other.ls' in the local cache .* and no setup step writes it"):
        load_task(task(evaluator={"func": "check_list", "result": {"type": "cache_file", "path": "other.ls"},
                                  "expected": {"type": "rule", "rules": {}}}))


def test_a_setup_step_past_its_limit_names_itself(desktop):
    with pytest.raises(EnvError, match=r"^setup step 2 \(execute\): 'sleep 5' ran over 1.0 s and was stopped$"):
        run_setup([{"type": "sleep", "parameters": {"seconds": 0}},
                   {"type": "execute", "parameters": {"command": "sleep 5", "timeout": 1}}], desktop)


def test_file_getters_read_the_home_and_the_store(desktop, tmp_path):
    (desktop.home / "Desktop" / "cpjpg").mkdir(parents=True)
    (desktop.home / "Desktop" / "cpjpg" / "a.jpg").write_text("")
    gold = tmp_path / "gold.xlsx"
    gold.write_text("")
    assert get_state({"type": "vm_file", "path": "/home/user/Desktop/cpjpg/a.jpg"}, desktop).endswith("cpjpg/a.jpg")
    assert get_state({"type": "vm_file", "path": "/home/user/nope.txt"}, desktop) is None
    both = get_state({"type": "vm_file", "path": ["/home/user/Desktop/cpjpg/a.jpg", "~/nope"], "dest": ["a", "b"]},
                     desktop)
    assert both[0].endswith("a.jpg") and both[1] is None
    assert get_state({"type": "list_directory", "path": "/home/user/Desktop/cpjpg"}, desktop) == {
        "type": "directory", "name": "cpjpg", "children": [{"type": "file", "name": "a.jpg"}]}
    assert get_state({"type": "cloud_file", "path": URL, "dest": "gold.xlsx"}, desktop,
                     files={(URL, "gold.xlsx"): str(gold)}) == str(gold)
    with pytest.raises(EnvError, match="gold.xlsx of the check is not in the project's file store"):
        get_state({"type": "cloud_file", "path": URL, "dest": "gold.xlsx"}, desktop)
    with pytest.raises(EnvError, match="outside the VM's home"):
        get_state({"type": "vm_file", "path": "/etc/passwd"}, desktop)
    assert get_state({"type": "vm_command_line", "command": "echo $HOME", "shell": True}, desktop) == \
        f"{desktop.home}\n"
    assert get_state({"type": "vm_command_error", "command": "echo oops >&2", "shell": True}, desktop) == "oops\n"
    assert get_state({"type": "vlc_config"}, desktop) is None


def test_vm_terminal_output_reads_the_terminals_typescript_without_its_escapes(desktop):
    assert get_state({"type": "vm_terminal_output"}, desktop) is None  # no terminal open
    (desktop.runtime / "terminal-1.log").write_text(
        "Script started\r\n\x1b]0;user@host: ~\x07\x1b[01;32muser\x1b[00m:~$ stty size\r\n43 132\r\n"
        "\x1b[?2004huser:~$ ")
    text = get_state({"type": "vm_terminal_output"}, desktop)
    assert "43 132\n" in text and "\x1b" not in text and "user:~$ stty size" in text
    assert terminal_text("abc\rxyz\n") == "xyz\n"


def test_the_sessions_sudo_runs_the_command_as_the_user_reading_the_password_line(tmp_path):
    sudo = tmp_path / "sudo"
    sudo.write_text(SUDO)
    sudo.chmod(0o755)

    def run(line: str) -> subprocess.CompletedProcess:
        return subprocess.run(line, shell=True, capture_output=True, text=True, cwd=tmp_path)

    assert run(f"echo password | {sudo} -S echo hello").stdout == "hello\n"
    assert run(f"{sudo} -u root -E -- id -u").stdout.strip() == str(__import__("os").getuid())
    assert run(f"printf 'password\\nrest\\n' | {sudo} -S cat").stdout == "rest\n"
    assert run(f"{sudo} -S").returncode == 0
    programs = session_programs()
    assert {"python3", "python", "sudo", "x-terminal-emulator", "gnome-terminal"} <= set(programs)


def test_chrome_and_vlc_stand_ins_say_what_they_are():
    programs = session_programs()
    if "google-chrome" in programs:
        assert "exec chromium" in programs["google-chrome"] and ".config/google-chrome" in programs["google-chrome"]
    if "vlc" in programs:
        assert "--http-password=password" in programs["vlc"] and "127.0.0.1" in programs["vlc"]


def test_the_shipped_tasks_still_load(tmp_path):
    from agent.envs.desktop.env import TASKS_DIR

    for path in sorted(TASKS_DIR.glob("*.json")):
        assert osworld.load_task_file(path).id == json.loads(path.read_text())["id"]


class _Screen:
    """An env whose check pays ``score`` whenever it is asked (as OSWorld's evaluator at an episode's end)."""

    def __init__(self, score):
        from agent.envs.base import Observation

        self.score, self.asked = score, 0
        self.observation = Observation(instruction="x", url="desktop://t", screenshot=b"", width=10, height=10)

    def reset(self, task, seed):
        return self.observation

    def step(self, action):
        from agent.envs.base import StepResult

        return StepResult(observation=self.observation, reward=0.0, done=False)

    def evaluate(self, *, answer=None):
        self.asked += 1
        if isinstance(self.score, Exception):
            raise self.score
        return self.score


class _Says:
    def __init__(self, text):
        self.text = text

    def act(self, messages, *, temperature=None):
        from agent.policies.base import PolicyOutput

        return PolicyOutput(text=self.text)


def test_the_rollout_reports_what_the_check_paid_and_no_reward_where_it_never_ran():
    from agent.rollout import run_episode
    from rollouts.worker import finish_reward

    waits = _Says("Thought: wait.\nAction: wait()")
    screen = _Screen(1.0)  # out of steps: the check scores the screen, as OSWorld does at every episode's end
    result = run_episode(screen, waits, task="t", seed=0, max_steps=2)
    assert (result.end_reason, result.reward, result.check_ran, screen.asked) == ("max_steps", 1.0, True, 1)
    assert finish_reward(result) == 1.0
    person = run_episode(_Screen(None), waits, task="t", seed=0, max_steps=1)  # a person-judged task
    assert person.unscored and finish_reward(person) is None
    broken = run_episode(_Screen(EnvError("no such file")), waits, task="t", seed=0, max_steps=1)
    assert broken.check_error == "no such file" and finish_reward(broken) is None
    garbage = _Screen(1.0)
    void = run_episode(garbage, _Says("no action here"), task="t", seed=0, max_steps=5)
    assert void.end_reason == "void_turns" and not void.check_ran and garbage.asked == 0
    assert void.reward == 0.0 and finish_reward(void) is None  # none, not the loop's default 0.0


def test_chromes_getters_read_its_preferences_and_the_active_tabs_address(desktop, monkeypatch):
    from agent.envs.desktop import chrome

    assert get_state({"type": "enable_do_not_track"}, desktop) == "false"  # no profile yet: Chrome's default
    preferences = desktop.home / ".config" / "google-chrome" / "Default" / "Preferences"
    preferences.parent.mkdir(parents=True)
    preferences.write_text(json.dumps({"enable_do_not_track": True}))
    assert get_state({"type": "enable_do_not_track"}, desktop) == "true"
    tabs = [{"url": "https://www.rentalcars.com/search?locationName=Z%C3%BCrich&sortBy=PRICE", "title": "Cars"},
            {"url": "https://example.com/", "title": "Older"}]  # DevTools lists the most recently used first
    monkeypatch.setattr(chrome, "_ask", lambda desktop, command, args, **kw: tabs if command == "tabs" else None)
    assert get_state({"type": "active_url_from_accessTree", "goto_prefix": "https://www."}, desktop) == tabs[0]["url"]
    parsed = get_state({"type": "active_tab_url_parse", "parse_keys": ["locationName", "sortBy", "missing"],
                        "replace": {"sortBy": "order"}}, desktop)
    assert parsed == {"locationName": "Zürich", "order": "PRICE", "missing": ""}
    assert get_state({"type": "open_tabs_info"}, desktop) == [{"title": "Older", "url": "https://example.com/"},
                                                              {"title": "Cars", "url": tabs[0]["url"]}]
    assert get_state({"type": "url_dashPart", "partIndex": -1, "needDeleteId": True, "returnType": "json",
                      "key": "page"}, desktop) == {"page": "search"}

    def no_browser(*args, **kwargs):
        raise EnvError("no browser answers on 127.0.0.1")

    monkeypatch.setattr(chrome, "_ask", no_browser)
    assert get_state({"type": "active_tab_url_parse", "parse_keys": ["x"]}, desktop) is None  # the check scores 0
    assert get_state({"type": "open_tabs_info"}, desktop) == []
