"""The human layer: commands people sent, their interventions, think-aloud audio, transcripts, reviews."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from rollouts.models import Episode, Step
from projects.models import Project


class CommandType(models.TextChoices):
    PAUSE = "pause"
    RESUME = "resume"
    APPROVE = "approve"
    EDIT = "edit"
    REJECT = "reject"
    TAKEOVER = "takeover"
    ACT = "act"
    HANDBACK = "handback"
    FINISH = "finish"
    CLAIM = "claim"       # take control of the episode (one controller at a time; managers may take it over)
    RELEASE = "release"   # give control up, so another annotator can claim it


class CommandStatus(models.TextChoices):
    ACCEPTED = "accepted"   # stored, waiting for the rollout worker
    APPLIED = "applied"
    REFUSED = "refused"


class Command(models.Model):
    """What a person asked of a live episode. Stored before it is delivered; unique per client id."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="commands")
    client_id = models.CharField(max_length=64)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    type = models.CharField(max_length=16, choices=CommandType.choices)
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=CommandStatus.choices, default=CommandStatus.ACCEPTED)
    error = models.CharField(max_length=300, blank=True)
    step_index = models.IntegerField(null=True, blank=True, help_text="The proposed step it answers, when it answers one.")
    created_at = models.DateTimeField(auto_now_add=True)
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "client_id"], name="command_unique_client_id")]
        indexes = [models.Index(fields=["episode", "status", "id"], name="command_pending")]
        ordering = ["id"]


class Intervention(models.Model):
    """One thing a person did to the trajectory: approve, edit, reject, take over, act, hand back, finish."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="interventions")
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="interventions")
    step_index = models.IntegerField(null=True, blank=True)
    command = models.OneToOneField(Command, null=True, blank=True, on_delete=models.SET_NULL, related_name="intervention")
    kind = models.CharField(max_length=16, choices=CommandType.choices)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    proposal = models.JSONField(null=True, blank=True)
    correction = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


class AudioClip(models.Model):
    """One recording of one person in one episode, uploaded in chunks."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="audio_clips")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    client_id = models.CharField(max_length=64)
    content_type = models.CharField(max_length=100)
    started_at = models.FloatField(help_text="Session-clock seconds (server epoch) when recording began.")
    committed_until = models.FloatField(default=0.0, help_text="Clip seconds up to which words are final.")
    transcribed_chunks = models.PositiveIntegerField(default=0)
    finished = models.BooleanField(default=False)
    voice_commands = models.BooleanField(default=False, help_text="Utterances that are commands (annotation/"
                                                                  "audio_commands.py) are sent as such, not thoughts.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "client_id"], name="audioclip_unique_client_id")]
        # the think-aloud batch (annotation/audio.py) looks among the clips still recording: few, among many finished
        indexes = [models.Index(fields=["id"], condition=models.Q(finished=False), name="audioclip_unfinished")]
        ordering = ["id"]


class AudioChunk(models.Model):
    clip = models.ForeignKey(AudioClip, on_delete=models.CASCADE, related_name="chunks")
    index = models.PositiveIntegerField()
    start_time = models.FloatField(help_text="Session-clock seconds at which this chunk starts.")
    file = models.CharField(max_length=200)
    size = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["clip", "index"], name="audiochunk_unique_index")]
        ordering = ["clip_id", "index"]


class TranscriptWord(models.Model):
    clip = models.ForeignKey(AudioClip, on_delete=models.CASCADE, related_name="words")
    position = models.PositiveIntegerField()
    word = models.CharField(max_length=100)
    start = models.FloatField(help_text="Session-clock seconds.")
    end = models.FloatField()
    probability = models.FloatField(default=0.0)
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="transcript_words")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["clip", "position"], name="word_unique_position")]
        ordering = ["clip_id", "position"]


class Verdict(models.TextChoices):
    ACCEPT = "accept"
    REJECT = "reject"


class Review(models.Model):
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    verdict = models.CharField(max_length=8, choices=Verdict.choices)
    grade = models.PositiveSmallIntegerField(null=True, blank=True)
    step_labels = models.JSONField(default=dict, blank=True, help_text='{"<step index>": "good|wasteful|wrong|critical"}')
    comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["episode", "reviewer"], name="review_one_per_reviewer"),
            models.CheckConstraint(condition=models.Q(grade__isnull=True) | models.Q(grade__gte=1, grade__lte=5),
                                   name="review_grade_range"),
        ]
        ordering = ["-updated_at", "-id"]


class QueueState(models.TextChoices):
    OPEN = "open"
    CLOSED = "closed"


class ReviewQueue(models.Model):
    """A manager's batch of episodes (a review-list filter frozen into items) that ``overlap`` assignees each
    review independently; disagreements go to a manager's adjudication."""

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="review_queues")
    name = models.CharField(max_length=200)
    filter = models.JSONField(default=dict, blank=True, help_text="The review list's query parameters it was made from.")
    overlap = models.PositiveSmallIntegerField(help_text="Reviewers per episode, 1 to 5.")
    assignees = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="review_queues")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=8, choices=QueueState.choices, default=QueueState.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="reviewqueue_unique_name"),
            models.CheckConstraint(condition=models.Q(overlap__gte=1, overlap__lte=5), name="reviewqueue_overlap_range"),
        ]
        ordering = ["-id"]


class ItemState(models.TextChoices):
    PENDING = "pending"            # fewer than ``overlap`` reviews so far
    DONE = "done"                  # every review agrees
    ADJUDICATION = "adjudication"  # the reviews disagree: a manager decides
    ADJUDICATED = "adjudicated"    # a manager recorded the final verdict


class QueueItem(models.Model):
    queue = models.ForeignKey(ReviewQueue, on_delete=models.CASCADE, related_name="items")
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="queue_items")
    reviews_done = models.PositiveSmallIntegerField(default=0)
    state = models.CharField(max_length=12, choices=ItemState.choices, default=ItemState.PENDING)
    final_verdict = models.CharField(max_length=8, choices=Verdict.choices, blank=True,
                                     help_text="The adjudicating manager's verdict; the episode's review status uses it.")
    adjudicated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                                       related_name="+")
    adjudicated_at = models.DateTimeField(null=True, blank=True)
    adjudication_comment = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["queue", "episode"], name="queueitem_unique_episode")]
        indexes = [models.Index(fields=["queue", "state", "id"], name="queueitem_queue_state")]
        ordering = ["id"]


class ClaimState(models.TextChoices):
    HELD = "held"          # locked to the reviewer until ``held_until``
    REVIEWED = "reviewed"  # their review counts towards the item's overlap
    SKIPPED = "skipped"    # they passed on it; it is not offered to them again


class QueueClaim(models.Model):
    """One reviewer's hold on (and then review of) one queue item. An item takes at most ``overlap``
    claims that are reviewed or held unexpired; an expired hold frees its place."""

    item = models.ForeignKey(QueueItem, on_delete=models.CASCADE, related_name="claims")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=8, choices=ClaimState.choices, default=ClaimState.HELD)
    held_until = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "reviewer"], name="queueclaim_one_per_reviewer")]
        indexes = [models.Index(fields=["reviewer", "state"], name="queueclaim_reviewer_state")]
        ordering = ["id"]


class RedactionVerdict(models.TextChoices):
    WRONG_HIT = "wrong_hit"  # redaction hid something that is not personal data
    MISSED = "missed"        # personal data it left as it was


class RedactionMark(models.Model):
    """A reviewer's check of the project's redaction (annotation/redaction.py): a wrong hit or a miss of one kind,
    in the text of a step where they saw it. The Personal data tab counts precision and recall against them."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=32)
    verdict = models.CharField(max_length=12, choices=RedactionVerdict.choices)
    text = models.CharField(max_length=300, help_text="What was hidden, or what should have been.")
    episode = models.ForeignKey(Episode, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    step_index = models.PositiveIntegerField(null=True, blank=True)
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "kind", "verdict", "text"],
                                               name="redactionmark_unique_text")]
        ordering = ["id"]
