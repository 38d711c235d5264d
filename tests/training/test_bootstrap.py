import pytest

from training.bootstrap import ensure_default_deployment
from rollouts.models import Deployment
from training.models import TrainingRun
from tests.factories import make_project, make_task


@pytest.mark.django_db
def test_first_start_deploys_the_scripted_baseline_and_queues_the_cold_start(django_capture_on_commit_callbacks):
    project = make_project()
    make_task(project)
    empty = make_project()  # a project without tasks has nothing to roll out
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        ensure_default_deployment(log=lambda *_: None)
        ensure_default_deployment(log=lambda *_: None)  # a second start queues nothing new
    active = Deployment.objects.get(project=project, active=True)
    assert active.backend == "scripted" and active.checkpoint.name == "scripted-baseline"
    runs = TrainingRun.objects.filter(project=project, config__stages__0__algorithm="coldstart")
    assert runs.count() == 1 and runs.get().config["deploy_as"] == "v0"
    assert not Deployment.objects.filter(project=empty).exists()
    assert len(callbacks) == 1  # the run is enqueued once it commits


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_cold_start_run_makes_demos_trains_and_deploys_v0_on_a_real_worker(celery_worker, monkeypatch):
    """The whole cold start, shrunk: demonstrations in Chromium, a LoRA SFT of the tiny random Llama (the real base,
    SmolLM2, is configuration, not a test dependency), v0 deployed for rollouts. Its steps outrun its time budget
    here, as on a slow machine: the run says the budget cut it."""
    import json
    from pathlib import Path

    from training import runs as training
    from training.models import RunStatus
    from trainer.configs import ColdstartConfig, parse_tasks
    from tests.stack import wait_for

    monkeypatch.setenv("LOUPE_COLDSTART_SEEDS", "0-1")
    monkeypatch.setenv("LOUPE_COLDSTART_STEPS", "100000")
    monkeypatch.setenv("LOUPE_COLDSTART_SECONDS", "2")
    monkeypatch.setenv("LOUPE_COLDSTART_BASE", "tiny")
    project = make_project()
    run = training.coldstart_run_create(project=project)
    wait_for(lambda: TrainingRun.objects.get(pk=run.pk).status in (RunStatus.SUCCEEDED, RunStatus.FAILED),
             timeout=240, interval=0.5, what="the cold-start run")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error
    [warning] = run.warnings
    assert warning.startswith("The time budget of 2 s cut training at step ") and "of 100000" in warning, warning
    assert [line["phase"] for line in run.metrics if "phase" in line][:2] == ["base", "demos"]
    active = Deployment.objects.get(project=project, active=True)
    assert active.checkpoint == run.checkpoint and active.checkpoint.name == "v0" and active.backend == "local"
    demos = Path(run.checkpoint.uri).parent / "demos.jsonl"
    rows = [json.loads(line) for line in demos.read_text().splitlines()]
    demonstrated = set(parse_tasks(ColdstartConfig().tasks))  # the cold start's tasks
    assert {row["meta"]["task"] for row in rows} == demonstrated
    # the thoughts quote the clicked element's line, as the prompt shows it
    for row in rows:
        answer, screen = row["messages"][-1]["content"], row["messages"][-2]["content"]
        quoted = answer.splitlines()[0][answer.index("[") :] if "[" in answer else ""
        assert quoted and quoted in screen.splitlines(), answer
    assert json.loads((Path(run.checkpoint.uri) / "loupe.json").read_text())["prompt_style"] == "named"
