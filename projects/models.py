"""The records of projects (docs/architecture.md, Records). Their tables keep the names the flywheel app gave them."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Role(models.TextChoices):
    ANNOTATOR = "annotator"
    MANAGER = "manager"
    ADMIN = "admin"


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    settings = models.JSONField(default=dict, blank=True, help_text="Routing, recipe and cycle settings.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_project"  # the table flywheel made: the model moved, its rows stayed
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_membership"  # the table flywheel made: the model moved, its rows stayed
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.project}"


class Split(models.TextChoices):
    TRAIN = "train"
    EVAL = "eval"


class TaskSpec(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tasks")
    env_kind = models.CharField(max_length=32, default="miniwob")
    task_name = models.CharField(max_length=100)
    instruction_template = models.TextField(blank=True)
    seed_start = models.PositiveIntegerField(default=0)
    seed_end = models.PositiveIntegerField(default=999)
    split = models.CharField(max_length=8, choices=Split.choices, default=Split.TRAIN)
    max_steps = models.PositiveIntegerField(default=10)
    definition = models.JSONField(
        null=True, blank=True,
        help_text="An authored task's own JSON (OSWorld for desktop, WebArena or any-URL for webapp), handed to the env "
                  "before each episode; null for a shipped task, found by its name (projects/taskspec_authoring.py).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_taskspec"  # the table flywheel made: the model moved, its rows stayed
        constraints = [
            models.UniqueConstraint(fields=["project", "env_kind", "task_name", "split"], name="taskspec_unique"),
            models.CheckConstraint(condition=Q(seed_end__gte=models.F("seed_start")), name="taskspec_seed_range"),
        ]
        ordering = ["task_name", "split", "id"]

    def __str__(self) -> str:
        return f"{self.task_name} ({self.split})"


class ProjectFile(models.Model):
    """A file a project's tasks download (an OSWorld task's ``download`` step or ``cloud_file`` check), uploaded by
    a manager, since the rollout workers reach no internet. Keyed by the URL the task names and the path it writes
    the file to (empty: the file for that URL wherever a task puts it). Its bytes are stored by their sha256."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="files")
    url = models.TextField()
    path = models.CharField(max_length=1000, blank=True, help_text="The VM path a download writes (or a check's dest "
                                                                   "name); empty: any.")
    name = models.CharField(max_length=255, help_text="The uploaded file's name.")
    stored = models.CharField(max_length=200, help_text="Storage name, addressed by sha256.")
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()
    uploaded_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_projectfile"  # the table flywheel made: the model moved, its rows stayed
        ordering = ["url", "path", "id"]
        constraints = [models.UniqueConstraint(fields=["project", "url", "path"], name="projectfile_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.url})"
