"""The records of snapshots (docs/architecture.md, Records). Their tables keep the names the flywheel app gave them."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from projects.models import Project
from rollouts.models import Episode


class SnapshotKind(models.TextChoices):
    SFT = "sft"
    DPO = "dpo"
    RL = "rl"
    CT = "ct"
    PRM = "prm"  # process reward: each step's label (good / bad / first error) for a PRM trainer


class SnapshotStatus(models.TextChoices):
    BUILDING = "building"
    READY = "ready"
    FAILED = "failed"


class DatasetSnapshot(models.Model):
    """Frozen rows with a content hash. Once ready it never changes: a database trigger refuses
    any update of a ready snapshot's rows, file or hash (see migration 0002)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="snapshots")
    kind = models.CharField(max_length=8, choices=SnapshotKind.choices)
    name = models.CharField(max_length=200, blank=True)
    filter = models.JSONField(default=dict, blank=True)
    routing = models.JSONField(default=dict, blank=True, help_text="The validator settings the rows were routed with.")
    status = models.CharField(max_length=12, choices=SnapshotStatus.choices, default=SnapshotStatus.BUILDING)
    progress = models.FloatField(default=0.0)
    source_key = models.CharField(max_length=64, blank=True, db_index=True,
                                  help_text="sha256 of kind, filter, routing and the episodes asked for: a second "
                                            "freeze of the same data returns this snapshot instead of a copy.")
    started_at = models.DateTimeField(null=True, blank=True, help_text="When a worker began writing it.")
    error = models.TextField(blank=True)
    rows = models.PositiveIntegerField(default=0)
    episodes = models.PositiveIntegerField(default=0)
    size_bytes = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True, help_text="Of the JSONL file.")
    file = models.CharField(max_length=300, blank=True, help_text="Storage name of the JSONL file.")
    parquet_file = models.CharField(max_length=300, blank=True)
    lineage = models.JSONField(default=dict, blank=True, help_text="Counts by task and checkpoint; the episode "
                                                                   "list is in SnapshotEpisode, step ids in each row.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "flywheel_datasetsnapshot"  # the table flywheel made: the model moved, its rows stayed
        ordering = ["-created_at", "-id"]


class SnapshotEpisode(models.Model):
    """Lineage: which episodes a snapshot holds rows of, and how many."""

    snapshot = models.ForeignKey(DatasetSnapshot, on_delete=models.CASCADE, related_name="members")
    episode = models.ForeignKey(Episode, on_delete=models.PROTECT, related_name="+")
    rows = models.PositiveIntegerField()

    class Meta:
        db_table = "flywheel_snapshotepisode"  # the table flywheel made: the model moved, its rows stayed
        constraints = [models.UniqueConstraint(fields=["snapshot", "episode"], name="snapshot_episode_unique")]
        indexes = [models.Index(fields=["episode", "snapshot"], name="snapshot_episode_by_episode")]


class RowsVersion(models.Model):
    """How many times what an episode's rows are made of has changed since a build first stored them: database
    triggers (snapshots migrations 0002 and 0003) count every change of the episode, its steps, their rejections
    and replays, its judgements, and its task's or checkpoint's record. A stored rendering is served only while it
    was read at the episode's current count (snapshots/stored_rows.py)."""

    episode = models.OneToOneField(Episode, primary_key=True, on_delete=models.CASCADE, related_name="+")
    version = models.BigIntegerField(default=0)


class RenderedRows(models.Model):
    """One episode's rows of one kind as a snapshot writes them, redacted: made once, then concatenated by every
    later build (snapshots/stored_rows.py). ``key`` is what decided them besides the episode (the kind, the target
    they are rendered for, the redaction policy's digest and the rendering code): a changed setting makes another
    key, so another rendering, never a stale one."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="+",
                                db_index=False)  # the unique constraint's index starts with it
    kind = models.CharField(max_length=8, choices=SnapshotKind.choices)
    key = models.CharField(max_length=64)
    version = models.BigIntegerField(help_text="The episode's RowsVersion when its rows were read.")
    rows = models.PositiveIntegerField()
    task = models.TextField(help_text="The episode's task name (the snapshot's lineage counts).")
    checkpoint = models.TextField(help_text="Its checkpoint's name, '(none)' without one.")
    jsonl = models.BinaryField(help_text="The rows' lines as data.jsonl holds them.")
    parquet = models.BinaryField(help_text="The rows as data.parquet takes them: JSON lines in the rows' own key "
                                           "order, meta as a JSON string.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "kind", "key"], name="rendered_rows_unique")]
