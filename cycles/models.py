"""The records of cycles (docs/architecture.md, Records). Their tables keep the names the flywheel app gave them."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from projects.models import Project, Split
from rollouts.models import Checkpoint, Deployment
from snapshots.models import DatasetSnapshot
from training.models import TrainingRun


class Evaluation(models.Model):
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="evaluations")
    cycle = models.ForeignKey("Cycle", null=True, blank=True, on_delete=models.SET_NULL, related_name="evaluations")
    role = models.CharField(max_length=12, blank=True, help_text="In a cycle: candidate or deployed.")
    split = models.CharField(max_length=8, choices=Split.choices, default=Split.EVAL)
    seeds = models.JSONField(default=list, blank=True)
    episodes = models.PositiveIntegerField(default=0)
    success_rate = models.FloatField(null=True, blank=True)
    mean_reward = models.FloatField(null=True, blank=True)
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_evaluation"  # the table flywheel made: the model moved, its rows stayed
        ordering = ["-created_at", "-id"]
        constraints = [  # a cycle measures each checkpoint once; a retried evaluation reuses the row
            models.UniqueConstraint(fields=["cycle", "checkpoint"], condition=Q(cycle__isnull=False),
                                    name="evaluation_once_per_cycle")
        ]


class CycleState(models.TextChoices):
    GATE = "gate"
    SNAPSHOT = "snapshot"
    TRAIN = "train"
    EVALUATE = "evaluate"
    DECIDE = "decide"
    DEPLOYED = "deployed"
    REJECTED = "rejected"
    SKIPPED = "skipped"
    FAILED = "failed"


CYCLE_TERMINAL = (CycleState.DEPLOYED, CycleState.REJECTED, CycleState.SKIPPED, CycleState.FAILED)


class Cycle(models.Model):
    """One turn of the flywheel: gate -> snapshot -> train -> evaluate -> decide -> deployed | rejected.
    At most one non-terminal cycle per project (a partial unique constraint); see cycles/cycles.py."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="cycles")
    iteration = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=CycleState.choices, default=CycleState.GATE)
    trigger = models.CharField(max_length=16, default="manual", help_text="manual, schedule or command.")
    triggered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    config = models.JSONField(default=dict, blank=True, help_text="The cycle settings it runs with, fixed at its start.")
    snapshots = models.ManyToManyField(DatasetSnapshot, blank=True, related_name="cycles")
    run = models.ForeignKey(TrainingRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    candidate = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    baseline = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                 help_text="The deployed checkpoint the candidate was measured against.")
    deployment = models.ForeignKey(Deployment, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                   help_text="The deployment this cycle made.")
    decision = models.CharField(max_length=300, blank=True)
    decision_data = models.JSONField(default=dict, blank=True, help_text="The numbers behind the decision.")
    error = models.TextField(blank=True)
    log_tail = models.TextField(blank=True)
    timings = models.JSONField(default=dict, blank=True, help_text="Per state: started, finished, seconds.")
    progress = models.JSONField(default=dict, blank=True, help_text="Of the long state now running: done, total, label.")
    worker = models.CharField(max_length=200, blank=True, help_text="Who holds the cycle's lease now.")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "flywheel_cycle"  # the table flywheel made: the model moved, its rows stayed
        constraints = [
            models.UniqueConstraint(fields=["project", "iteration"], name="cycle_unique_iteration"),
            models.UniqueConstraint(fields=["project"], condition=~Q(state__in=CYCLE_TERMINAL),
                                    name="cycle_one_running"),
        ]
        ordering = ["-iteration"]

    def __str__(self) -> str:
        return f"cycle {self.iteration} of {self.project} ({self.state})"


