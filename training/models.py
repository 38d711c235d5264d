"""The records of training (docs/architecture.md, Records). Their tables keep the names the flywheel app gave them."""
from __future__ import annotations

from django.db import models

from projects.models import Project
from rollouts.models import Checkpoint
from snapshots.models import DatasetSnapshot


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class TrainingRun(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs")
    algorithm = models.CharField(max_length=8)  # sft | dpo | rl
    config = models.JSONField(default=dict, blank=True)
    snapshot = models.ForeignKey(DatasetSnapshot, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    init_checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    progress = models.FloatField(default=0.0)
    metrics = models.JSONField(default=list, blank=True, help_text="The trainer's progress lines, in order.")
    warnings = models.JSONField(default=list, blank=True, help_text="What a person should know about how training "
                                                                    "went (cut by its time budget, capped epochs).")
    log = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Kept fresh while a train worker runs it.")

    class Meta:
        db_table = "flywheel_trainingrun"  # the table flywheel made: the model moved, its rows stayed
        ordering = ["-created_at", "-id"]
