"""The records of rollouts (docs/architecture.md, Records). Their tables keep the names the flywheel app gave them."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from agent.formats import FORMATS
from projects.models import Project, TaskSpec

# The answer formats of agent/formats: how a checkpoint writes its actions, and how a step's raw output was read.
# The columns have database defaults too, so rows written in SQL (bench/bench_review.py) need not name them.
ACTION_FORMAT_CHOICES = [(name, name) for name in FORMATS]


class Checkpoint(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="checkpoints")
    name = models.CharField(max_length=100)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    uri = models.CharField(max_length=500, help_text="Checkpoint directory (HF format) or object-store URI.")
    base_model = models.CharField(max_length=200, default="tiny")
    produced_by = models.ForeignKey("training.TrainingRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    metrics = models.JSONField(default=dict, blank=True)
    action_format = models.CharField(max_length=16, choices=ACTION_FORMAT_CHOICES, default="loupe", db_default="loupe",
                                     help_text="The format its answers are written in (agent/formats).")
    reads_images = models.BooleanField(
        default=False, db_default=False,
        help_text="Its prompts carry the screenshots (a vision-language model); otherwise only the screen's text.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_checkpoint"  # the table flywheel made: the model moved, its rows stayed
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="checkpoint_name_unique")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class Backend(models.TextChoices):
    LOCAL = "local"
    OPENAI = "openai"
    SCRIPTED = "scripted"  # the tasks' scripted solvers: an oracle baseline, and the UI's tests


class Deployment(models.Model):
    """Which checkpoint serves a project's rollouts. Exactly one active per project."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="deployments")
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.PROTECT, related_name="deployments")
    backend = models.CharField(max_length=16, choices=Backend.choices, default=Backend.LOCAL)
    served_name = models.CharField(max_length=200, blank=True, help_text="Model/adapter name on the openai server.")
    active = models.BooleanField(default=False)
    activated_at = models.DateTimeField(null=True, blank=True)
    deactivated_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    reason = models.CharField(max_length=300, blank=True)

    class Meta:
        db_table = "flywheel_deployment"  # the table flywheel made: the model moved, its rows stayed
        constraints = [
            models.UniqueConstraint(fields=["project"], condition=Q(active=True), name="deployment_one_active")
        ]
        ordering = ["-activated_at", "-id"]


class Mode(models.TextChoices):
    AUTONOMOUS = "autonomous"
    SUPERVISED = "supervised"


class EpisodeStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class Outcome(models.TextChoices):
    NONE = ""
    SUCCESS = "success"
    FAILURE = "failure"
    INFEASIBLE = "infeasible"


class ReviewStatus(models.TextChoices):
    UNREVIEWED = "unreviewed"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    DISPUTED = "disputed"  # reviewers disagree


class Episode(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="episodes")
    task = models.ForeignKey(TaskSpec, on_delete=models.PROTECT, related_name="episodes")
    seed = models.PositiveIntegerField()
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="episodes")
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.AUTONOMOUS)
    status = models.CharField(max_length=16, choices=EpisodeStatus.choices, default=EpisodeStatus.QUEUED)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, blank=True, default="")
    end_reason = models.CharField(max_length=300, blank=True)
    comment = models.TextField(blank=True, help_text="What the person wrote when they finished the episode.")
    env_reward = models.FloatField(null=True, blank=True)
    instruction = models.TextField(blank=True, default="", db_default="",
                                   help_text="The task's instruction as the environment gave it for this seed.")
    review_reason = models.TextField(
        blank=True, default="", db_default="",
        help_text="Why a person should review the episode before it is routed: the person's outcome and the task's "
                  "check disagree. Routing by reward waits for that review.")
    review_summary = models.JSONField(default=dict, blank=True, help_text="reviews, accepts, rejects, grade_mean.")
    review_status = models.CharField(max_length=12, choices=ReviewStatus.choices, default=ReviewStatus.UNREVIEWED)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    controller = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                   help_text="The one person steering a supervised episode.")
    pending_index = models.IntegerField(null=True, blank=True, help_text="Index of the proposal awaiting a person.")
    human_control = models.BooleanField(default=False, help_text="A person has taken over acting.")
    screen_width = models.PositiveIntegerField(default=0)
    screen_height = models.PositiveIntegerField(default=0)
    n_steps = models.PositiveIntegerField(default=0)
    n_interventions = models.PositiveIntegerField(default=0)
    n_void = models.PositiveIntegerField(default=0)
    last_seq = models.PositiveBigIntegerField(default=0, help_text="Seq of the newest event.")
    worker = models.CharField(max_length=200, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    ask_reason = models.CharField(max_length=200, blank=True, default="", db_default="",
                                  help_text="Why the model asks a person now (its confidence under the project's "
                                            "floor); empty when it does not.")
    asked_at = models.DateTimeField(null=True, blank=True, help_text="Since when it has waited for a person.")
    attempt = models.PositiveIntegerField(default=0)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="branches",
                               help_text="The episode this one branched from (same task and seed).")
    branched_at = models.PositiveIntegerField(null=True, blank=True,
                                              help_text="The parent's step this branch acts on anew: its steps "
                                                        "before it are the parent's, replayed and checked.")
    rl_run = models.CharField(max_length=200, blank=True, default="", db_default="",
                              help_text="The RL run that played the episode through the environment service, as the "
                                        "run names itself; empty for every other episode.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "flywheel_episode"  # the table flywheel made: the model moved, its rows stayed
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "rl_run", "-id"], condition=~Q(rl_run=""), name="episode_project_rl_run"),
            models.Index(fields=["project", "-created_at", "-id"], name="episode_project_recent"),
            models.Index(fields=["project", "asked_at"], condition=Q(asked_at__isnull=False), name="episode_asking"),
            models.Index(fields=["project", "status", "-id"], name="episode_project_status"),
            models.Index(fields=["status", "heartbeat_at"], name="episode_liveness"),
            models.Index(fields=["project", "review_status", "-id"], name="episode_project_review"),
            models.Index(fields=["project", "task", "-id"], name="episode_project_task"),
            models.Index(fields=["project", "checkpoint", "-id"], name="episode_project_checkpoint"),
            models.Index(fields=["project", "created_by", "-id"], name="episode_project_annotator"),
            models.Index(fields=["project", "-n_steps", "-id"], name="episode_project_steps"),
            models.Index(fields=["project", "-n_interventions", "-id"], name="episode_project_interventions"),
            # the review list's "person and check disagree" filter
            models.Index(fields=["project", "-id"], condition=~Q(review_reason=""), name="episode_project_disagreement"),
            # a queued episode's place in its lane (selectors.episode_queue_position)
            models.Index(fields=["mode", "id"], condition=Q(status="queued"), name="episode_queued_lane"),
        ]

    def __str__(self) -> str:
        return f"episode {self.pk} ({self.task.task_name} seed {self.seed})"


class Actor(models.TextChoices):
    MODEL = "model"
    HUMAN = "human"
    EDITED = "edited"


class PolishState(models.TextChoices):
    """Where a step's think-aloud words are on their way to a polished thought (annotation/polish.py)."""
    NONE = "", "no words"
    QUEUED = "queued"
    DONE = "done"
    FAILED = "failed"
    EDITED = "edited"


class Correction(models.TextChoices):
    """What a person's step changed of the model's proposal: the action, only the thought, or nothing (a
    takeover that did what the model proposed). Model steps carry none."""

    NONE = ""
    ACTION = "action"
    THOUGHT = "thought"
    SAME = "same"


PROMPT_HELP = ("The exact chat messages the policy saw; each screenshot it was sent is a reference to the stored "
               "file (loupe-storage:<name>, see rollouts.steps.prompt_as_sent).")


CONFIDENCE_HELP = ("How sure the policy was of its action: exp of the mean logprob of the answer's action tokens "
                   "(agent/confidence.py); empty without logprobs.")


MARGIN_HELP = "Mean logprob of the action tokens over their runner-up's, where the backend returned top-k."


class Step(models.Model):
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    screenshot = models.CharField(max_length=200, blank=True, help_text="Storage name, addressed by sha256.")
    width = models.PositiveIntegerField(default=0)
    height = models.PositiveIntegerField(default=0)
    url = models.CharField(max_length=500, blank=True)
    instruction = models.TextField(blank=True)
    elements = models.JSONField(default=list, blank=True)
    screen_text = models.TextField(blank=True, default="", db_default="",
                                   help_text="Text the screen showed besides its elements (a terminal's output).")
    feedback = models.TextField(blank=True, default="", db_default="",
                                help_text="What the model was told at this step besides rejections: a person's answer "
                                          "to its call_user, or that no one answered.")
    prompt = models.JSONField(default=list, blank=True, help_text=PROMPT_HELP)
    raw_output = models.TextField(blank=True)
    action_format = models.CharField(max_length=16, choices=ACTION_FORMAT_CHOICES, default="loupe", db_default="loupe",
                                     help_text="The format raw_output was written and read in.")
    token_ids = models.JSONField(default=list, blank=True)
    token_logprobs = models.JSONField(default=list, blank=True)
    thought = models.TextField(blank=True)
    action = models.JSONField(null=True, blank=True, help_text='{"name": ..., "args": {...}}; null for a void turn.')
    action_text = models.TextField(blank=True)  # whole: a typed text is never cut
    actor = models.CharField(max_length=8, choices=Actor.choices, default=Actor.MODEL)
    proposal = models.JSONField(null=True, blank=True, help_text="The model's turn when a person overrode it.")
    correction = models.CharField(max_length=8, choices=Correction.choices, blank=True, default=Correction.NONE,
                                  help_text="What the person's turn changed of the proposal (see Correction).")
    intervened_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    reward = models.FloatField(default=0.0)
    done = models.BooleanField(default=False)
    void = models.BooleanField(default=False)
    void_reason = models.CharField(max_length=300, blank=True)
    human_thought = models.TextField(blank=True, help_text="What a person who acted on or approved the step said "
                                                          "aloud during it: the aligned think-aloud words, raw.")
    polished_thought = models.TextField(blank=True, default="", db_default="",
                                        help_text="human_thought rewritten as a thought in the model's style "
                                                  "(annotation/polish.py), or as a person edited it; rows use it.")
    polish_state = models.CharField(max_length=8, choices=PolishState.choices, blank=True, default=PolishState.NONE,
                                    db_default="")
    polish_error = models.CharField(max_length=500, blank=True, default="", db_default="",
                                    help_text="Why the last polish gave no thought, in plain words.")
    polish_source = models.TextField(blank=True, default="", db_default="",
                                     help_text="The words the polished thought was made from (stale when "
                                               "human_thought has changed since).")
    polished_at = models.DateTimeField(null=True, blank=True, help_text="When polish_state last changed.")
    info = models.JSONField(default=dict, blank=True)
    timings = models.JSONField(default=dict, blank=True)
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    confidence = models.FloatField(null=True, blank=True, help_text=CONFIDENCE_HELP)
    confidence_margin = models.FloatField(null=True, blank=True, help_text=MARGIN_HELP)
    started_at = models.DateTimeField(null=True, blank=True, help_text="When it was proposed or the person began acting.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_step"  # the table flywheel made: the model moved, its rows stayed
        constraints = [models.UniqueConstraint(fields=["episode", "index"], name="step_unique_index")]
        ordering = ["episode_id", "index"]


class Rejection(models.Model):
    """A model proposal a person rejected before it ran: the prompt it answered, what the model said (with
    its logprobs), and the person's reason. Linked to its step once the step runs; a DPO pair when the step
    did something else."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="rejections")
    step_index = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField(help_text="1 for the step's first proposal, 2 for the next...")
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="rejections")
    prompt = models.JSONField(default=list, blank=True, help_text=PROMPT_HELP)
    raw_output = models.TextField(blank=True)
    action_format = models.CharField(max_length=16, choices=ACTION_FORMAT_CHOICES, default="loupe", db_default="loupe",
                                     help_text="The format raw_output was written and read in.")
    token_ids = models.JSONField(default=list, blank=True)
    token_logprobs = models.JSONField(default=list, blank=True)
    thought = models.TextField(blank=True)
    action = models.JSONField(null=True, blank=True)
    action_text = models.TextField(blank=True)  # whole: a typed text is never cut
    void_reason = models.CharField(max_length=300, blank=True)
    reason = models.TextField(blank=True, help_text="Why the person rejected it, in their words.")
    repeated = models.BooleanField(default=False, help_text="Its action had already been rejected at this step.")
    confidence = models.FloatField(null=True, blank=True, help_text=CONFIDENCE_HELP)
    confidence_margin = models.FloatField(null=True, blank=True, help_text=MARGIN_HELP)
    rejected_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    checkpoint = models.ForeignKey(Checkpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_rejection"  # the table flywheel made: the model moved, its rows stayed
        constraints = [models.UniqueConstraint(fields=["episode", "step_index", "attempt"],
                                               name="rejection_unique_attempt")]
        ordering = ["episode_id", "step_index", "attempt"]


class Event(models.Model):
    """The append-only log a reconnecting client replays; seq increases per episode."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=32)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_event"  # the table flywheel made: the model moved, its rows stayed
        constraints = [models.UniqueConstraint(fields=["episode", "seq"], name="event_unique_seq")]
        ordering = ["episode_id", "seq"]


class JudgeVerdict(models.TextChoices):
    SUCCESS = "success"
    FAILURE = "failure"
    NONE = "", "no verdict"


class Judgement(models.Model):
    """A judge's verdict on a finished episode (annotation/judge.py): success or failure with a reason and the share
    of its k samples that voted so, or no verdict with the reason (garbage, a timeout). An episode keeps every
    judgement; the newest (``latest``) is the one routing reads."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="judgements")
    verdict = models.CharField(max_length=8, choices=JudgeVerdict.choices, blank=True)
    reason = models.TextField(blank=True)
    confidence = models.FloatField(null=True, blank=True, help_text="Share of the samples that voted the verdict.")
    votes = models.JSONField(default=list, blank=True, help_text="Each sample: verdict, reason, raw answer.")
    judge = models.CharField(max_length=16, help_text="The backend: rule, openai or scripted.")
    model = models.CharField(max_length=200, blank=True, help_text="The model that answered (openai).")
    config = models.JSONField(default=dict, blank=True, help_text="The judge settings it ran with.")
    latest = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="Who asked for it; empty when it ran after the episode.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_judgement"  # the table flywheel made: the model moved, its rows stayed
        ordering = ["-created_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["episode"], condition=Q(latest=True),
                                               name="judgement_one_latest")]
        indexes = [models.Index(fields=["episode", "verdict"], condition=Q(latest=True), name="judgement_latest")]


class CorrectionKind(models.TextChoices):
    EDIT = "edit"
    TAKEOVER = "takeover"
    REJECTION = "rejection", "answered rejection"


class CorrectionReplay(models.Model):
    """Did a cycle's candidate learn a correction (cycles/learned.py): a corrected step whose rows it trained on
    (or, ``held_out``, one of the validation split), its stored prompt asked of the candidate, greedy; ``learned``
    when the answer is the person's action (the same canonical action, or a click inside the same element)."""

    # a step's record that cycles write: named by string, rollouts imports nothing of the cycles above it
    cycle = models.ForeignKey("cycles.Cycle", on_delete=models.CASCADE, related_name="correction_replays")
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="correction_replays")
    kind = models.CharField(max_length=10, choices=CorrectionKind.choices)
    held_out = models.BooleanField(default=False)
    learned = models.BooleanField()
    answer = models.TextField(blank=True, help_text="The candidate's greedy answer to the step's stored prompt.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "flywheel_correctionreplay"  # the table flywheel made: the model moved, its rows stayed
        constraints = [models.UniqueConstraint(fields=["cycle", "step"], name="correction_replay_once")]
        indexes = [models.Index(fields=["step", "cycle"], name="correction_replay_by_step")]
