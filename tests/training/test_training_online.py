"""A training run's online rl stage (issue 37): whole-episode GRPO (python -m trainer rl-online) against a real
environment service, with a token minted for the run's manager, kept off the log and revoked when the stage ends; its
episodes are Loupe's, marked with the run. Without LOUPE_ENV_SERVICE_URL such a stage is refused when asked for."""
from __future__ import annotations

import pytest

from core.errors import ApplicationError
from cycles import cycle_settings
from training import deployments
from training import runs
from rollouts.models import Episode, EpisodeStatus
from projects.models import Membership, Role
from training.models import RunStatus, TrainingRun
from tests.envservice.conftest import TASK, service  # noqa: F401  (the fixture)
from tests.factories import make_member, make_project, make_task, make_user
from webapp.models import ApiToken

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


@pytest.fixture
def managed(monkeypatch):
    from training import tasks as training_tasks

    monkeypatch.setattr(training_tasks.training_run_execute, "delay", lambda *args, **kwargs: None)  # the test executes it
    project = make_project()
    make_task(project, TASK)
    manager = make_user()
    make_member(project, manager, Role.MANAGER)
    return project, manager


@pytest.mark.browser  # the service's MiniWoB envs
def test_an_online_rl_run_plays_whole_episodes_through_the_service_marked_with_the_run_and_revokes_its_token(
        service, managed, tmp_path, settings, monkeypatch):  # noqa: F811
    from trainer.model import save_tiny_untrained

    url, svc = service
    project, manager = managed
    settings.LOUPE_ENV_SERVICE_URL, settings.LOUPE_CHECKPOINT_DIR = url, tmp_path / "checkpoints"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    v0 = deployments.checkpoint_register(project=project, name="v0", uri=str(save_tiny_untrained(tmp_path / "v0")))
    deployments.deployment_promote(project=project, checkpoint=v0, reason="test")

    run = runs.online_run_create(project=project, task=TASK, seeds="3", actor=manager, max_steps=1, group_size=2,
                                     max_turns=2, max_new_tokens=24)
    assert run.init_checkpoint == v0 and run.config["stages"][0]["online"]
    assert runs.run_execute(run_id=run.pk) == RunStatus.SUCCEEDED, TrainingRun.objects.get(pk=run.pk).error

    run.refresh_from_db()
    command = next(line for line in run.log.splitlines() if line.startswith("$ python -m trainer rl-online ")).split()
    options = dict(zip(command, command[1:]))
    assert (options["--env-service"], options["--project"], options["--task"], options["--seeds"], options["--run"]) \
        == (url, str(project.pk), TASK, "3", f"run-{run.pk}")
    assert "--token" not in options  # the token reaches the trainer in its environment, not the log
    metrics = run.checkpoint.metrics
    assert (metrics["online"], metrics["steps"], metrics["episodes"], metrics["run"]) == (True, 1, 2, f"run-{run.pk}")
    played = Episode.objects.filter(project=project, rl_run=f"run-{run.pk}")
    assert sorted(played.values_list("pk", flat=True)) == sorted(metrics["episode_ids"])
    assert all(e.status == EpisodeStatus.FINISHED for e in played)
    token = ApiToken.objects.get(user=manager, name=f"training run {run.pk}: online rl")
    assert token.last_used_at is not None  # the trainer played with it ...
    assert token.revoked_at is not None  # ... and it died with the stage
    assert svc.status()["pools"][0]["leased"] == 0


def test_an_online_stage_is_refused_without_a_service_url_or_with_a_task_the_project_lacks(managed, settings):
    project, manager = managed
    settings.LOUPE_ENV_SERVICE_URL = ""
    with pytest.raises(ApplicationError, match="LOUPE_ENV_SERVICE_URL") as refused:
        runs.online_run_create(project=project, task=TASK, actor=manager)
    assert refused.value.status == 409
    with pytest.raises(ApplicationError, match="LOUPE_ENV_SERVICE_URL"):
        cycle_settings.settings_clean(project, {"recipe": [{"algorithm": "rl", "online": True, "task": TASK}]})
    settings.LOUPE_ENV_SERVICE_URL = "http://127.0.0.1:9"
    with pytest.raises(ApplicationError, match="No task 'nope' in this project; its tasks: enter-text"):
        runs.online_run_create(project=project, task="nope", actor=manager)
    with pytest.raises(ApplicationError, match="do not read as a range"):
        runs.online_run_create(project=project, task=TASK, seeds="a-b", actor=manager)
    with pytest.raises(ApplicationError, match="an rl stage's setting"):
        cycle_settings.settings_clean(project, {"recipe": [{"algorithm": "sft", "online": True, "task": TASK}]})
    assert not TrainingRun.objects.filter(project=project).exists()  # nothing half-made
    stage = cycle_settings.settings_clean(project, {"recipe": [{"algorithm": "rl", "online": True, "task": TASK,
                                                                "seeds": "0-7", "max_turns": 6}]})["recipe"][0]
    assert stage == {"algorithm": "rl", "max_steps": 100, "online": True, "task": TASK, "seeds": "0-7", "max_turns": 6}


def test_an_unreachable_service_fails_the_run_saying_so_and_revokes_its_token_an_ex_managers_run_mints_none(
        managed, tmp_path, settings, monkeypatch):
    from rollouts.models import Checkpoint

    project, manager = managed
    settings.LOUPE_ENV_SERVICE_URL, settings.LOUPE_CHECKPOINT_DIR = "http://127.0.0.1:9", tmp_path / "checkpoints"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (tmp_path / "v0").mkdir()
    v0 = Checkpoint.objects.create(project=project, name="v0", uri=str(tmp_path / "v0"))
    # a cycle's run (no requester): its token acts for the project's manager
    run = runs.recipe_run_create(project=project, init_checkpoint=v0, checkpoint_name="c1", stages=[
        {"algorithm": "rl", "online": True, "task": TASK, "seeds": "0-3", "snapshot": None}])
    assert runs.run_execute(run_id=run.pk) == RunStatus.FAILED
    run.refresh_from_db()
    assert "cannot use the environment service at http://127.0.0.1:9" in run.error, run.error
    assert ApiToken.objects.get(user=manager).revoked_at is not None

    Membership.objects.filter(user=manager).update(role=Role.ANNOTATOR)  # who asked is no longer a manager
    make_member(project, make_user(), Role.MANAGER)
    run = runs.online_run_create(project=project, task=TASK, actor=manager, init_checkpoint=v0)
    assert runs.run_execute(run_id=run.pk) == RunStatus.FAILED
    assert "no longer a manager" in TrainingRun.objects.get(pk=run.pk).error
    assert ApiToken.objects.count() == 1  # no token minted for anyone else
