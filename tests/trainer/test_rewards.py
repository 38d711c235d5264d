"""trainer/rewards.py: how GRPO scores an answer. An env reward that carries an authored any-URL task's JSON scores
answers in the real webapp env (the env learns the JSON first, as the rollout worker's does). The rule rewards on
actions are judged in tests/trainer/test_vlm_grpo.py, on the rows its fixtures draw."""
from __future__ import annotations

import pytest

from agent.actions import Action
from tests.agent.test_webapp_env import team_app  # noqa: F401 - the team's own app, served for any-URL tasks
from tests.trainer.test_authored_tasks import authored
from trainer.model import TrainerError
from trainer.rewards import EnvReward, Envs


def test_an_env_reward_that_is_not_an_object_says_what_definition_is():
    spec = {"kind": "env", "env": "webapp", "task": "team-settings", "seed": 0, "definition": "team.json"}
    with pytest.raises(TrainerError, match=r"rl.jsonl:3: an env reward's 'definition' is the task's JSON \(an object\)"):
        EnvReward.read(spec, "rl.jsonl:3")


@pytest.mark.browser
def test_a_grpo_env_reward_of_an_authored_task_is_scored_in_the_env_after_its_prefix(team_app):  # noqa: F811
    definition = authored(team_app + "/index.html")
    base = {"kind": "env", "env": "webapp", "task": "team-settings", "seed": 0, "definition": definition}
    envs = Envs()
    try:
        shipped_only = EnvReward.read({**base, "definition": None}, "rl.jsonl:1")
        with pytest.raises(TrainerError, match="rl.jsonl:1: reward: the webapp env cannot start team-settings .*"
                                               "unknown webapp task 'team-settings'"):
            envs.probe(shipped_only, "rl.jsonl:1: reward")  # without its JSON the trainer's env knows no such task
        start = EnvReward.read(base, "rl.jsonl:1")
        envs.probe(start, "rl.jsonl:1: reward")
        link = next(e for e in envs.get("webapp").reset("team-settings", 0).elements if e.text == "Settings")
        after = EnvReward.read({**base, "prefix": [f"click(x={link.x}, y={link.y})"]}, "rl.jsonl:2")
        finished = Action("finished", {"answer": ""})
        assert start.score(finished, envs) == 0.0  # the home page: the check fails
        assert after.score(finished, envs) == 1.0  # the prefix opened the settings: the check passes
        assert (envs.episodes, envs.steps, envs.failures) == (2, 3, 0)
        other = EnvReward.read({**base, "definition": {**definition, "task_id": "team-other"}}, "rl.jsonl:3")
        assert other.score(finished, envs) == 0.0 and envs.failures == 1  # its JSON names another task: not run
    finally:
        envs.close()
