"""The verl hand-off without verl: the export of a project's tasks and an RL snapshot as verl's parquet rows, and the
agent loop's episode playing through a real environment service (trainer/launch/verl/episode.py); the loop module
imports without verl and names it when verl is asked for."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command

from agent.formats import render
from agent.solvers import solve_step
from envservice.client import EnvServiceClient, observation_of
from snapshots.models import DatasetSnapshot
from rollouts.models import Episode, EpisodeStatus
from projects.models import Split
from tests.envservice.conftest import TASK, TakenOverService
from tests.factories import make_project, make_task
from trainer.launch.verl import agent_loop
from trainer.launch.verl.episode import LoupeEpisode

pytestmark = pytest.mark.django_db(transaction=True)

COLUMNS = {"data_source", "agent_name", "ability", "prompt", "reward_model", "extra_info"}


def test_the_export_writes_the_tasks_as_verl_rows_train_and_val_and_an_rl_snapshots_rows(tmp_path):
    project = make_project()
    make_task(project, TASK)
    make_task(project, "click-button", split=Split.EVAL)
    call_command("verl_dataset", project=project.pk, out=str(tmp_path), seeds_per_task=3)

    train = pq.read_table(tmp_path / "train.parquet").to_pylist()
    val = pq.read_table(tmp_path / "val.parquet").to_pylist()
    assert set(train[0]) == COLUMNS and len(train) == 3 and len(val) == 3
    first = train[0]
    assert first["agent_name"] == "loupe_agent" and first["data_source"] == f"loupe:{TASK}"
    assert [m["role"] for m in first["prompt"]] == ["system", "user"] and TASK in first["prompt"][1]["content"]
    assert first["reward_model"]["style"] == "rule"
    assert {k: first["extra_info"][k] for k in ("project", "task", "seed", "format")} == {
        "project": project.pk, "task": TASK, "seed": 0, "format": "loupe"}
    assert [r["extra_info"]["seed"] for r in train] == [0, 1, 2] and val[0]["extra_info"]["task"] == "click-button"

    reward = {"kind": "action", "action": "click(x=40, y=50)", "box": [30, 40, 50, 60]}
    rows = [{"messages": [{"role": "user", "content": "screen"}], "format": "loupe", "width": 160, "height": 210,
             "reward": reward}]
    name = default_storage.save("snapshots/verl-test.jsonl", ContentFile("".join(json.dumps(r) + "\n" for r in rows)))
    snapshot = DatasetSnapshot.objects.create(project=project, kind="rl", status="ready", file=name, rows=1)
    call_command("verl_dataset", project=project.pk, out=str(tmp_path), seeds_per_task=1, snapshot=[snapshot.pk])
    (exported,) = pq.read_table(tmp_path / f"snapshot-{snapshot.pk}.parquet").to_pylist()
    assert exported["prompt"] == rows[0]["messages"] and json.loads(exported["reward_model"]["ground_truth"]) == reward

    with pytest.raises(CommandError, match="no tasks"):
        call_command("verl_dataset", project=make_project().pk, out=str(tmp_path))


def test_the_loops_episode_plays_through_the_service_void_answers_told_reward_from_the_env(service, manager_token):
    url, svc = service
    project, token = manager_token
    client = EnvServiceClient(url, token)
    messages = agent_loop.first_messages([{"role": "user", "content": "Do the task."}], "The screen now: ...")
    assert messages[-1]["content"] == "Do the task.\nThe screen now: ..."

    episode = LoupeEpisode(client, project=project.pk, task=TASK, seed=4, run="verl-test")
    assert "The screen now:" in episode.start()
    told = episode.act("I would rather not.")  # a void turn: told to the model, stored in Loupe
    assert "could not be read" in told and episode.void == 1
    history = []
    while True:
        obs = observation_of(client.get(episode.lease)["observation"])
        turn = solve_step(TASK, obs, history)
        history.append(turn)
        if episode.act(render(turn.thought, turn.action, format="loupe", width=obs.width, height=obs.height)) is None:
            break
    assert episode.finish() == pytest.approx(1.0, abs=0.01) and episode.lease is None
    stored = Episode.objects.get(pk=episode.episode)
    assert (stored.status, stored.rl_run, stored.n_void) == (EpisodeStatus.FINISHED, "verl-test", 1)

    unfinished = LoupeEpisode(client, project=project.pk, task=TASK, seed=5, run="verl-test")
    unfinished.start()
    assert unfinished.finish() == 0.0  # ended where it stood: the task's own check says unsolved
    assert Episode.objects.get(pk=unfinished.episode).end_reason == "the RL caller ended it"
    assert svc.status()["pools"][0]["leased"] == 0


def test_the_loop_module_imports_without_verl_and_names_it_when_asked():
    try:
        import verl  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="verl"):
            agent_loop.LoupeAgentLoop  # noqa: B018
    else:
        assert agent_loop.LoupeAgentLoop.__name__ == "LoupeAgentLoop"


def test_the_loops_episode_tells_the_model_what_a_person_did_when_they_took_over():
    episode = LoupeEpisode(TakenOverService(), project=1, task=TASK, seed=0, run="r")
    episode.start()
    told = episode.act("Action: click(x=3, y=3)")
    assert told.startswith('A person took over and acted: click(x=1, y=2); type(text="a").') and episode.steps == 2
