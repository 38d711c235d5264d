"""Tasks written as JSON (authored tasks) where the trainer builds envs: ``trainer eval --task-defs`` refuses a file
or task it cannot use in one plain line, and a GRPO env reward that carries an authored any-URL task's JSON scores
answers in the real webapp env (tests/trainer/test_rewards.py)."""
from __future__ import annotations

import json

import pytest

from trainer import cli
from trainer.model import save_tiny_untrained
from tests.agent.test_webapp_env import team_app  # noqa: F401 - the team's own app, served for any-URL tasks

SETTINGS_CHECK = {"type": "dom_content", "selector": "#status", "must_include": ["notifications are on"]}


def authored(start_url: str, **changes) -> dict:
    return {"task_id": "team-settings", "start_url": start_url, "instruction": "Open the settings.",
            "check": SETTINGS_CHECK, **changes}


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    return save_tiny_untrained(tmp_path_factory.mktemp("authored") / "init")


@pytest.mark.parametrize("defs, tasks, message", [
    (None, "team-settings", "--tasks team-settings: not a webapp task; give its JSON in --task-defs"),
    ("[1, 2]", "team-settings", "expected a JSON object of task name -> {\"env_kind\", \"definition\"}"),
    ("{nope", "team-settings", "cannot read it as JSON"),
    ({"team-settings": {"env_kind": "webapp"}}, "team-settings", "team-settings needs a \"definition\" object"),
    ({"team-settings": {"env_kind": "desktop", "definition": authored("http://127.0.0.1:9/")}}, "team-settings",
     "team-settings is a 'desktop' task, but --env is webapp"),
    ({"team-settings": {"env_kind": "webapp", "definition": authored("https://example.com/")}}, "team-settings",
     "--task-defs team-settings: the task's JSON was refused: "),
    ({"team-settings": {"env_kind": "webapp", "definition": authored("http://127.0.0.1:9/", task_id="other")}},
     "team-settings", "its JSON defines the task 'other', not 'team-settings'"),
    ({"team-settings": {"env_kind": "webapp", "definition": authored("http://127.0.0.1:9/",
                                                                     task_id="shop-review")}},
     "team-settings", "the id of a shipped task"),
])
def test_task_defs_an_eval_cannot_use_exit_2_with_one_plain_line(init, tmp_path, capsys, defs, tasks, message):
    argv = ["eval", "--init", str(init), "--out", str(tmp_path / "out"), "--env", "webapp", "--tasks", tasks,
            "--seeds", "0"]
    if defs is not None:
        path = tmp_path / "tasks.json"
        path.write_text(defs if isinstance(defs, str) else json.dumps(defs))
        argv += ["--task-defs", str(path)]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and message in captured.err and captured.err.count("\n") == 1
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_task_defs_that_cannot_be_found_are_named(init, tmp_path, capsys):
    assert cli.main(["eval", "--init", str(init), "--out", str(tmp_path / "out"), "--env", "webapp", "--tasks",
                     "team-settings", "--seeds", "0", "--task-defs", str(tmp_path / "missing.json")]) == 2
    assert f"--task-defs {tmp_path / 'missing.json'}: cannot read it as JSON" in capsys.readouterr().err
