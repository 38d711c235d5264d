"""First start: make sure every project that has none gets a deployable tiny policy (checkpoint v0).

v0 is trained by our own trainer (cold start: SFT on the scripted solvers' demonstrations) as an
ordinary TrainingRun on the `train` queue, so its progress shows in the browser like any other run.
"""
from __future__ import annotations

from flywheel.models import Deployment, Project, RunStatus, TrainingRun


def ensure_default_deployment(*, log=print) -> None:
    from flywheel import training

    for project in Project.objects.filter(tasks__isnull=False).distinct():
        if Deployment.objects.filter(project=project, active=True).exists():
            continue
        pending = TrainingRun.objects.filter(project=project, config__coldstart=True,
                                             status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).first()
        if pending:
            log(f"{project.name}: cold-start training run {pending.pk} is {pending.status}.")
            continue
        run = training.coldstart_run_create(project=project)
        log(f"{project.name}: no deployed policy yet; queued cold-start training run {run.pk} "
            f"(progress on the project's Runs page).")
