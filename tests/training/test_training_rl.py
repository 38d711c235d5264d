"""An rl stage of a training run from a text checkpoint (issue 34): the RL snapshot holds step rows in words (no
screenshots), and the run trains GRPO through TRL (trainer/grpo.py, the path a vision-language checkpoint takes) with
the options the flywheel passes, its env task started before training. A snapshot rendered for the other kind of
model is refused before the trainer starts, saying what to do."""
from __future__ import annotations

import json

import pytest

from training import deployments
from snapshots import build
from training import runs
from rollouts.models import Checkpoint, Deployment
from training.models import RunStatus, TrainingRun
from tests.factories import make_finished_episode

pytestmark = [pytest.mark.django_db, pytest.mark.browser, pytest.mark.timeout(600)]


def freeze(project, kind):
    snapshot = build.snapshot_create(project=project, kind=kind, build=False)
    snapshot = build.snapshot_build(snapshot_id=snapshot.pk)
    assert snapshot.status == "ready", snapshot.error
    return snapshot


def test_an_rl_stage_from_a_text_checkpoint_trains_grpo_through_trl(demo, tmp_path, settings, monkeypatch):
    from trainer.model import save_tiny_untrained

    settings.LOUPE_CHECKPOINT_DIR = tmp_path / "checkpoints"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the trainer's process: two threads crawl on a busy 2-core machine
    project = demo["project"]
    make_finished_episode(project, demo["task"], steps=[{"action": None}, {}], reward=1.0)
    v0 = deployments.checkpoint_register(project=project, name="v0", uri=str(save_tiny_untrained(tmp_path / "v0")))
    deployments.deployment_promote(project=project, checkpoint=v0, reason="test")
    rl = freeze(project, "rl")
    assert rl.rows == 2 and not rl.lineage["rendered_for"]["reads_images"]  # a row a step, the void one too

    run = runs.recipe_run_create(project=project, init_checkpoint=v0, checkpoint_name="c1", stages=[
        {"algorithm": "rl", "snapshot": rl.pk, "max_steps": 1, "group_size": 2}])
    assert runs.run_execute(run_id=run.pk) == RunStatus.SUCCEEDED, TrainingRun.objects.get(pk=run.pk).error
    run.refresh_from_db()
    command = next(line for line in run.log.splitlines() if line.startswith("$ python -m trainer rl ")).split()
    options = dict(zip(command, command[1:]))
    assert (options["--advantage"], options["--group-size"], options["--max-new-tokens"]) == ("grpo", "2", "96")
    metrics = run.checkpoint.metrics
    assert (metrics["algorithm"], metrics["model"], metrics["rows"], metrics["steps"]) == ("rl", "text", 2, 1)
    assert metrics["answers"] == 2 * 2 and metrics["env_failures"] == 0  # both rows a step (8192 / 2048) x 2 answers
    assert json.loads((tmp_path / "checkpoints" / f"project-{project.pk}" / f"run-{run.pk}" / "checkpoint" /
                       "loupe.json").read_text())["algorithm"] == "rl"


def test_an_rl_stage_from_a_text_checkpoint_on_rows_with_screenshots_fails_saying_why(demo, tmp_path, settings):
    settings.LOUPE_CHECKPOINT_DIR = tmp_path / "checkpoints"
    project = demo["project"]
    make_finished_episode(project, demo["task"], steps=[{"action": {"name": "click", "args": {"x": 3, "y": 4}}}])
    (tmp_path / "reader").mkdir()
    reader = Checkpoint.objects.create(project=project, name="reader", uri=str(tmp_path / "reader"),
                                       action_format="uitars", reads_images=True)
    Deployment.objects.filter(project=project, active=True).update(active=False)  # records only: no weights read
    Deployment.objects.create(project=project, checkpoint=reader, active=True)
    rl = freeze(project, "rl")  # rendered for the checkpoint that reads screenshots
    text = tmp_path / "text"
    text.mkdir()
    (text / "config.json").write_text(json.dumps({"model_type": "llama"}))
    init = Checkpoint.objects.create(project=project, name="text", uri=str(text))
    run = runs.recipe_run_create(project=project, init_checkpoint=init, checkpoint_name="c1",
                                     stages=[{"algorithm": "rl", "snapshot": rl.pk, "max_steps": 1}])
    assert runs.run_execute(run_id=run.pk) == RunStatus.FAILED
    run.refresh_from_db()
    assert run.error.startswith(f"Snapshot {rl.pk} holds RL rows with screenshots, for a model that reads them; this "
                                "stage trains a text model"), run.error
    assert "$ python -m trainer" not in run.log  # refused before a trainer started
