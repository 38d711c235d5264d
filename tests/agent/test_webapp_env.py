"""The webapp env on the real django-oscar shop (its own venv and server process) in the system Chromium.

One env (one shop server, one browser) for the module; the site is built on first use if `make sites` has
not built it yet (about 2 minutes once, then cached under .data/sites).
"""
import functools
import http.server
import json
import shutil
import socket
import subprocess
import threading

import pytest

from agent.actions import Action
from agent.envs import EnvError, make_env, tasks_for
from agent.envs.webapp import WebAppEnv
from agent.envs.webapp.sites import build_oscar, wiki_missing
from agent.envs.webapp.solutions import SOLUTIONS, solution_for
from agent.envs.webapp.tasks import TaskFormatError, load_task, load_task_file
from agent.policies.base import Policy, PolicyOutput
from agent.policies.scripted import ScriptedPolicy
from agent.rollout import run_episode


@pytest.fixture(scope="module")
def env():
    env = make_env("webapp")
    yield env
    env.close()


class _FirstLook(Policy):
    """The scripted policy backend, with the task's score taken at the first turn, before anything was done."""

    name = "scripted"

    def __init__(self, env: WebAppEnv, task: str) -> None:
        self.env, self.inner, self.untouched = env, ScriptedPolicy(task), None

    def act(self, messages, *, temperature=None) -> PolicyOutput:
        if self.untouched is None:
            self.untouched = self.env.evaluate(answer="")
        return self.inner.act(messages, temperature=temperature)


NO_WIKI = pytest.mark.skipif(bool(wiki_missing()), reason="needs Debian's mediawiki, php-sqlite3, php-cli (make test-tools)")


@pytest.mark.parametrize("task", [pytest.param(t, marks=NO_WIKI) if t.startswith("wiki-") else t for t in SOLUTIONS])
def test_every_shipped_task_scores_0_untouched_and_1_after_its_scripted_solution(env, task):
    """Played through the rollout loop by the scripted backend (what `make run` uses before v0): it reads the
    screen's elements and its last four turns from the rendered prompt, nothing else."""
    policy = _FirstLook(env, task)
    result = run_episode(env, policy, task=task, seed=0, max_steps=tasks_for("webapp")[task].max_steps)
    assert policy.untouched == 0.0
    assert result.end_reason == "finished" and result.reward == 1.0, (
        result.end_reason, result.error, [step.turn.raw for step in result.steps[-4:]])


def test_a_scripted_solution_played_directly_scores_1(env):
    """ScriptedSolution (the bench's driver) needs no prompt: one action a call from the observation."""
    obs = env.reset("shop-price-answer", 0)
    solution = solution_for("shop-price-answer")
    for _ in range(12):
        result = env.step(solution.next_action(obs))
        obs = result.observation
        if result.done:
            break
    assert result.done and result.reward == 1.0 and result.info["answer"] == "£35.00"


def test_every_shipped_task_has_a_solution_and_a_registry_entry():
    assert set(tasks_for("webapp")) == set(SOLUTIONS)
    assert len(SOLUTIONS) >= 6


def test_the_observation_is_a_1280x720_screenshot_with_the_pages_elements(env):
    obs = env.reset("shop-add-to-basket", 0)
    assert (obs.width, obs.height) == (1280, 720)
    assert obs.screenshot[:2] == b"\xff\xd8"  # JPEG
    assert obs.instruction == 'Add the "Bluetooth Speaker" to the basket.'
    assert obs.url.endswith("/catalogue/category/electronics/audio_6/")
    texts = {(e.role, e.text) for e in obs.elements}
    assert {("link", "Audio"), ("text", "£0.00"), ("button", "Search"), ("select", "Relevancy")} <= texts
    assert all(0 <= e.x < 1280 and 0 <= e.y < 720 for e in obs.elements)


def test_reset_gives_a_fresh_shop_and_browser_nothing_of_the_last_episode(env):
    env.tasks["basket-empty"] = load_task(_webarena(task_id="basket-empty", start_url="__SHOP__/catalogue/spice-routes_14/",
                                                    eval={"eval_types": ["site_state"],
                                                          "site_state": [{"check": "basket_empty"}]}))
    obs = env.reset("basket-empty", 0)
    assert env.evaluate() == 1.0
    button = next(e for e in obs.elements if e.text == "Add to basket")
    obs = env.step(Action("click", {"x": button.x, "y": button.y})).observation
    assert ("text", "£22.00") in {(e.role, e.text) for e in obs.elements} and env.evaluate() == 0.0
    obs = env.reset("basket-empty", 0)
    assert env.evaluate() == 1.0  # the basket line is gone from the database
    assert ("text", "£0.00") in {(e.role, e.text) for e in obs.elements}  # and from the page (no old cookie)


def test_an_action_outside_the_screen_does_nothing_and_says_why(env):
    env.reset("shop-category-url", 0)
    result = env.step(Action("click", {"x": 1500, "y": 100}))
    assert "outside the 1280x720 screenshot" in result.info["error"]
    assert not result.done


def test_a_wrong_answer_scores_0(env):
    env.reset("shop-price-answer", 0)
    result = env.step(Action("finished", {"answer": "£45.00"}))
    assert result.done and result.reward == 0.0


# -- task files ----------------------------------------------------------------------------------
def _webarena(**changes):
    task = {"task_id": 7, "start_url": "__SHOP__/", "intent": "do it",
            "eval": {"eval_types": ["url_match"], "reference_url": "__SHOP__/basket/"}}
    task.update(changes)
    return task


def test_a_webarena_task_with_an_unknown_eval_type_is_refused_naming_it():
    with pytest.raises(TaskFormatError, match=r"task '7'.*unsupported eval types? llm_judge"):
        load_task(_webarena(eval={"eval_types": ["url_match", "llm_judge"], "reference_url": "__SHOP__/"}))


@pytest.mark.parametrize("changes, message", [
    ({"intent": None}, "missing field: intent"),
    ({"eval": {"eval_types": ["string_match"]}}, "string_match needs reference_answers"),
    ({"start_url": "__GITLAB__/explore"}, "__GITLAB__, a WebArena site not served here"),
    ({"start_url": "http://example.com/"}, "must begin with a site placeholder"),
    ({"eval": {"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "func:shopping_get_latest_order_url()", "required_contents": {"must_include": ["x"]}}]}},
     "func: helpers are not supported"),
    ({"eval": {"eval_types": ["site_state"], "site_state": [{"check": "wiki_revision"}]}},
     "unknown site check 'wiki_revision'"),
])
def test_a_malformed_webarena_task_is_refused_with_what_to_fix(changes, message):
    with pytest.raises(TaskFormatError, match=message):
        load_task(_webarena(**changes))


def test_a_task_file_with_a_bad_task_names_the_file_and_the_task(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([_webarena(task_id="ok"), _webarena(task_id="bad", eval={"eval_types": ["nope"]})]))
    with pytest.raises(TaskFormatError, match=r"task 'bad' in mine.json: unsupported eval type nope"):
        load_task_file(path)


def _any_url(**changes):
    task = {"task_id": "team-1", "start_url": "http://127.0.0.1:9/", "instruction": "do it",
            "check": {"type": "person"}}
    task.update(changes)
    return task


@pytest.mark.parametrize("changes, message", [
    ({"start_url": "https://example.com/app"}, "the host example.com is not allowed; allowed hosts: 127.0.0.1, localhost"),
    ({"start_url": "ftp://127.0.0.1/x"}, "is not a web address"),
    ({"start_url": "not a url"}, "is not a web address"),
    ({"start_url": "http://user:pw@127.0.0.1/"}, "holds a user name or password"),
    ({"check": {"type": "screenshot_diff"}}, "unknown check type 'screenshot_diff'"),
    ({"check": {"type": "dom_content", "selector": "h1"}}, "needs must_include"),
    ({"instruction": ""}, "missing field: instruction"),
])
def test_a_malformed_any_url_task_is_refused_with_what_to_fix(changes, message):
    with pytest.raises(TaskFormatError, match=message):
        load_task(_any_url(**changes))


def test_allowed_hosts_come_from_the_setting(monkeypatch):
    monkeypatch.setenv("LOUPE_WEBAPP_ALLOWED_HOSTS", "app.internal")
    assert load_task(_any_url(start_url="http://app.internal:8080/")).start_url == "http://app.internal:8080/"


def test_a_teams_task_files_come_from_the_setting_and_bad_ones_are_named(monkeypatch, tmp_path):
    from agent.envs.webapp.env import _all_tasks

    (tmp_path / "team.json").write_text(json.dumps([_any_url(task_id="team-settings")]))
    monkeypatch.setenv("LOUPE_WEBAPP_TASKS_DIR", str(tmp_path))
    tasks = _all_tasks()
    assert tasks["team-settings"].kind == "any_url" and "shop-guest-checkout" in tasks
    (tmp_path / "clash.json").write_text(json.dumps([_webarena(task_id="shop-review")]))
    with pytest.raises(TaskFormatError, match="task ids shop-review are shipped tasks' ids"):
        _all_tasks()


# -- any-URL tasks on a team's own app -----------------------------------------------------------
TEAM_APP = {
    "index.html": "<h1>Team app</h1><a href='settings.html'>Settings</a> <a href='http://example.com/'>Elsewhere</a>",
    "settings.html": "<h1>Settings</h1><p id='status'>Notifications are on</p>",
}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def team_app(tmp_path_factory):
    root = tmp_path_factory.mktemp("team-app")
    for name, html in TEAM_APP.items():
        (root / name).write_text(f"<html><body>{html}</body></html>")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _click_text(env, obs, text):
    element = next(e for e in obs.elements if e.text == text)
    return env.step(Action("click", {"x": element.x, "y": element.y}))


def test_an_any_url_task_with_url_and_dom_checks_scores_on_the_team_app(env, team_app):
    env.tasks["team-url"] = load_task(_any_url(task_id="team-url", start_url=team_app + "/index.html", check={
        "type": "url_match", "url": team_app + "/settings.html"}))
    env.tasks["team-dom"] = load_task(_any_url(task_id="team-dom", start_url=team_app + "/index.html", check={
        "type": "dom_content", "selector": "#status", "must_include": ["notifications are on"]}))
    for task in ("team-url", "team-dom"):
        obs = env.reset(task, 0)
        assert env.evaluate() == 0.0
        obs = _click_text(env, obs, "Settings").observation
        assert obs.url == team_app + "/settings.html"
        assert env.step(Action("finished", {"answer": ""})).reward == 1.0


def test_an_any_url_task_judged_by_a_person_gets_no_automatic_reward(env, team_app):
    env.tasks["team-person"] = load_task(_any_url(task_id="team-person", start_url=team_app + "/index.html"))
    env.reset("team-person", 0)
    result = env.step(Action("finished", {"answer": "done"}))
    assert result.done and result.reward == 0.0 and result.info["verdict"] == "person"


def test_the_browser_is_kept_from_hosts_not_allowed(env, team_app):
    env.tasks["team-leave"] = load_task(_any_url(task_id="team-leave", start_url=team_app + "/index.html"))
    obs = env.reset("team-leave", 0)
    result = _click_text(env, obs, "Elsewhere")
    assert "kept from http://example.com/" in result.info.get("error", ""), (result.info, result.observation.url)
    assert result.observation.url == team_app + "/index.html"


def test_a_site_that_does_not_answer_is_a_clear_env_error(env):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    env.tasks["team-down"] = load_task(_any_url(task_id="team-down", start_url=url))
    with pytest.raises(EnvError, match=rf"the site at {url} does not answer: .*ERR_CONNECTION_REFUSED"):
        env.reset("team-down", 0)


def test_an_authored_any_url_task_scores_0_untouched_and_1_after_its_solution(env, team_app):
    """Given as its JSON (the Tasks page, tasks_import), as the rollout worker hands it over."""
    definition = _any_url(task_id="authored-settings", start_url=team_app + "/index.html",
                          instruction="Open the settings.",
                          check={"type": "dom_content", "selector": "#status", "must_include": ["notifications are on"]})
    assert env.add_task(definition) == "authored-settings"
    obs = env.reset("authored-settings", 0)
    assert obs.instruction == "Open the settings." and env.evaluate() == 0.0
    _click_text(env, obs, "Settings")
    assert env.step(Action("finished", {"answer": ""})).reward == 1.0
    with pytest.raises(TaskFormatError, match="the id of a shipped task"):
        env.add_task({**definition, "task_id": "shop-review"})
    with pytest.raises(TaskFormatError, match="is not a web address"):
        env.add_task({**definition, "start_url": "intranet/settings"})


def _shop_servers() -> set[str]:
    return set(subprocess.run(["pgrep", "-f", "sites/oscar/serve.py"], capture_output=True, text=True).stdout.split())


def test_a_shop_that_cannot_start_is_a_clear_env_error_and_leaves_no_process(tmp_path):
    golden, _ = build_oscar(quiet=True)
    bad = tmp_path / "golden"
    shutil.copytree(golden, bad, ignore=shutil.ignore_patterns("golden.sqlite3", "static", "media"))
    (bad / "golden.sqlite3").write_bytes(b"this is not a database" * 100)
    broken = WebAppEnv(golden=bad)
    before = _shop_servers()
    try:
        with pytest.raises(EnvError, match=r"the shop site did not start: .*cannot be read: file is not a database"):
            broken.reset("shop-add-to-basket", 0)
        assert broken.server_pid is None
    finally:
        broken.close()
    assert _shop_servers() == before  # the failed server is gone


@NO_WIKI
def test_a_wiki_episode_starts_from_a_fresh_copy_of_the_wiki(env):
    env.reset("wiki-edit-page", 0)
    env._page.goto(env.sites["wiki"] + "/index.php?title=Coffee_machine&action=edit")  # an edit, done directly
    env._page.fill("#wpTextbox1", "Use only filtered water.")
    with env._page.expect_navigation():
        env._page.click("#wpSave")
    assert env.evaluate() == 0.0 and "filtered water" in env._page.inner_text("#mw-content-text")
    env.reset("wiki-edit-page", 0)
    assert "descaled every Friday" in env._page.inner_text("#mw-content-text")
    assert "filtered water" not in env._page.inner_text("#mw-content-text")


@NO_WIKI
def test_a_wiki_that_cannot_start_is_a_clear_env_error_and_leaves_no_process(tmp_path):
    from agent.envs.webapp.sites import build_wiki

    golden, _ = build_wiki(quiet=True)
    bad = tmp_path / "wiki"
    shutil.copytree(golden, bad)
    for path in (bad / "data").glob("*.sqlite"):
        path.write_bytes(b"this is not a database" * 100)
    broken = WebAppEnv()
    broken.wiki_golden = bad
    before = _wiki_servers()
    try:
        with pytest.raises(EnvError, match=r"the wiki did not start: it answered HTTP 500"):
            broken.reset("wiki-open-page", 0)
        assert broken.wiki_pid is None
    finally:
        broken.close()
    assert _wiki_servers() == before


def test_close_stops_the_site_servers(env):  # last: the module's env is closed
    env.reset("shop-category-url", 0)
    pids = [pid for pid in (env.server_pid, env.wiki_pid) if pid]
    assert env.server_pid and all(subprocess.run(["kill", "-0", str(pid)]).returncode == 0 for pid in pids)
    env.close()
    assert all(subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0 for pid in pids)
    assert env.server_pid is None and env.wiki_pid is None
    assert not _wiki_servers()


def _wiki_servers() -> str:
    return subprocess.run(["pgrep", "-af", "opcache.enable_cli=1 -S 127.0.0.1"], capture_output=True, text=True).stdout.strip()
