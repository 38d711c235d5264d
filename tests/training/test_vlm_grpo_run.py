"""An rl stage of a training run from a screen-reading checkpoint (issue 19): the RL snapshot of real MiniWoB episodes,
rendered for a tiny Qwen2.5-VL in UI-TARS's format, holds GRPO step rows; the run trains SFT then GRPO through
``python -m trainer`` (training.runs), the flywheel passing what GRPO of a VLM needs, and every readable answer is
scored in the real env, replayed to its step."""
from __future__ import annotations

import json

import pytest

from agent import formats
from agent.envs import make_env
from agent.solvers import solve_step
from training import deployments
from rollouts import episodes
from rollouts import steps
from snapshots import build
from training import runs
from rollouts.models import Checkpoint, Episode
from training.models import RunStatus, TrainingRun
from tests.factories import make_task

pytestmark = [pytest.mark.django_db, pytest.mark.browser, pytest.mark.timeout(900)]  # 100 s quiet; 300 s at load 10 (CI)

TASK = "click-option"  # two steps: pick the option, then submit


def play(env, seed: int) -> list[tuple]:
    """(observation, turn, result) of each step of the scripted solver on ``seed`` in the real env."""
    observation, history, played = env.reset(TASK, seed), [], []
    while not played or not played[-1][2].done:
        turn = solve_step(TASK, observation, history)
        result = env.step(turn.action)
        played.append((observation, turn, result))
        history.append(turn)
        observation = result.observation
    return played


def record(project, task, seed: int, played: list[tuple], *, void_after: int | None = None) -> Episode:
    """An autonomous episode of what was ``played``, its answers stored as the uitars checkpoint would write them (no
    thought: a short answer the tiny model learns in a few steps); a void turn before step ``void_after`` (it ran
    nothing, so the screen stays). Stored after the env is closed: Playwright's greenlets would give the ORM calls
    made while it runs another connection, outside the test's transaction."""
    episode = Episode.objects.create(project=project, task=task, seed=seed, mode="autonomous", status="running")
    index = 0
    for number, (observation, turn, result) in enumerate(played):
        answer = formats.render("", turn.action, format="uitars", width=observation.width, height=observation.height)
        spec = [("click on it", None, "no action")] if number == void_after else []
        for raw, action, void in [*spec, (answer, turn.action.to_dict(), None)]:
            last = action is not None and result.done
            steps.step_record(
                episode=episode, index=index, screenshot=observation.screenshot, width=observation.width,
                height=observation.height, url=observation.url, instruction=observation.instruction,
                elements=[e.__dict__ for e in observation.elements], prompt=[], raw_output=raw, token_ids=[1],
                token_logprobs=[-0.1], thought="", action=action, action_text="", actor="model", proposal=None,
                reward=result.reward if last else 0.0, done=last, void_reason=void, info={}, timings={},
                action_format="uitars")
            index += 1
    return episodes.episode_finish(episode_id=episode.pk, status="finished", end_reason="done",
                                   reward=played[-1][2].reward)


def freeze(project, kind: str):
    snapshot = build.snapshot_create(project=project, kind=kind, build=False)
    snapshot = build.snapshot_build(snapshot_id=snapshot.pk)
    assert snapshot.status == "ready", snapshot.error
    return snapshot


def test_an_rl_stage_from_a_reading_checkpoint_trains_grpo_scored_in_the_real_env(demo, tmp_path, settings,
                                                                                    monkeypatch):
    from trainer.tiny_vlm import save_tiny_vlm

    settings.LOUPE_CHECKPOINT_DIR = tmp_path / "checkpoints"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the trainer's processes: two threads crawl on a busy 2-core machine
    project = demo["project"]
    task = make_task(project, TASK, max_steps=4)
    env = make_env("miniwob")
    try:
        played = {seed: play(env, seed) for seed in (3, 4)}
    finally:
        env.close()
    solved = [record(project, task, 3, played[3], void_after=1), record(project, task, 4, played[4])]
    assert all(e.env_reward > 0.5 for e in solved)
    base = deployments.checkpoint_register(project=project, name="base", uri=str(save_tiny_vlm(tmp_path / "vlm")),
                                           action_format="uitars")
    deployments.deployment_promote(project=project, checkpoint=base, reason="test")
    sft, rl = freeze(project, "sft"), freeze(project, "rl")
    assert rl.rows == 5 and rl.lineage["rendered_for"]["reads_images"]  # 2 + 2 steps and the void turn

    # SFT first, so that the tiny model writes readable UI-TARS clicks and the env gets to score them
    run = runs.recipe_run_create(project=project, init_checkpoint=base, checkpoint_name="c1", stages=[
        {"algorithm": "sft", "snapshot": sft.pk, "max_steps": 50, "lr": 0.01},
        {"algorithm": "rl", "snapshot": rl.pk, "max_steps": 1, "group_size": 4, "max_new_tokens": 24}])
    assert runs.run_execute(run_id=run.pk) == RunStatus.SUCCEEDED, TrainingRun.objects.get(pk=run.pk).error
    run.refresh_from_db()
    command = next(line for line in run.log.splitlines() if line.startswith("$ python -m trainer rl ")).split()
    options = dict(zip(command, command[1:]))
    assert (options["--advantage"], options["--group-size"], options["--max-new-tokens"]) == ("grpo", "4", "24")
    grpo = run.checkpoint.metrics["stages"][1]
    assert (grpo["advantage"], grpo["model"], grpo["rows"], grpo["steps"]) == ("grpo", "vlm", 5, 1)
    assert grpo["answers"] == 4 * 4  # 4 prompts a step (8192 / 2048 tokens) x 4 answers
    readable = grpo["answers"] - grpo["void_answers"]
    assert readable > 0 and grpo["env_failures"] == 0, grpo
    # each readable answer reset the env on its row's seed, replayed the row's prefix and ran: real env episodes
    # (3 of the 5 rows start after a prefix, and 4 rows are sampled: prefixes were replayed)
    assert grpo["env_episodes"] == readable and grpo["env_steps"] > readable, grpo
    assert json.loads((tmp_path / "checkpoints" / f"project-{project.pk}" / f"run-{run.pk}" / "checkpoint" /
                       "loupe.json").read_text())["algorithm"] == "rl"
    assert Checkpoint.objects.get(name="c1", project=project).reads_images
    print("VLM-GRPO-RUN", json.dumps({k: grpo[k] for k in ("answers", "void_answers", "answers_rewarded", "env_episodes",
                                                          "env_steps", "reward_mean", "train_seconds")}))


def test_an_rl_stage_from_a_vision_checkpoint_on_episode_rows_fails_saying_why(demo, tmp_path, settings):
    from tests.factories import make_finished_episode

    settings.LOUPE_CHECKPOINT_DIR = tmp_path / "checkpoints"
    project = demo["project"]
    make_finished_episode(project, demo["task"], steps=[{}])
    rl = freeze(project, "rl")  # nothing deployed: rendered for the tiny text model, no screenshots
    vlm = tmp_path / "vlm"
    vlm.mkdir()
    (vlm / "config.json").write_text(json.dumps({"vision_config": {}}))
    init = Checkpoint.objects.create(project=project, name="vlm", uri=str(vlm), action_format="uitars",
                                     reads_images=False)
    run = runs.recipe_run_create(project=project, init_checkpoint=init, checkpoint_name="c1",
                                     stages=[{"algorithm": "rl", "snapshot": rl.pk, "max_steps": 1}])
    assert runs.run_execute(run_id=run.pk) == RunStatus.FAILED
    run.refresh_from_db()
    assert run.error.startswith(f"Snapshot {rl.pk} holds RL rows for a model that reads no screenshots"), run.error
