"""The supervisor hook of the rollout loop, run inside the rollout worker.

Before each step executes, the loop asks `review()`. Commands that people sent over the WebSocket
were stored by annotation/services.py and announced with PostgreSQL NOTIFY; here the worker wakes
on that notification, reads the stored commands in order and applies them at this point of the
step, each by its kind's class in annotation/commands.py: approve / edit / reject the proposal,
pause / resume, take over and act, hand back, finish.
In autonomous mode the proposal runs at once unless someone paused or took over, or the policy is unsure: a
proposal whose confidence is under the project's floor (rollouts/asking.py) pauses the episode in the person
queue until a person decides it; then the episode runs on alone.
While it waits for a person, the env's screen streams to the episode's watchers (annotation/live_view.py)."""
from __future__ import annotations

import logging
import time

import psycopg
from django.conf import settings
from django.db import close_old_connections

from agent.envs.base import Env
from agent.rollout import Decision
from annotation import services
from annotation.audio import words_align
from annotation.commands import COMMANDS, CommandRefused, StepPoint, command_refuse
from annotation.live_view import LiveView
from annotation.models import Command, TranscriptWord
from rollouts import asking
from rollouts import steps
from rollouts import episodes
from rollouts import privacy
from rollouts.models import Episode, EpisodeStatus, Mode
from rollouts.episodes import EpisodeStop
from rollouts.worker import LiveSupervisor

log = logging.getLogger(__name__)


class SupervisorIdle(EpisodeStop):
    status = EpisodeStatus.INTERRUPTED


def _conninfo() -> str:
    db = settings.DATABASES["default"]
    parts = {"dbname": db["NAME"], "user": db.get("USER") or "", "password": db.get("PASSWORD") or "",
             "host": db.get("HOST") or "", "port": str(db.get("PORT") or "")}
    return " ".join(f"{k}='{v}'" for k, v in parts.items() if v)


def supervisor_for(episode: Episode) -> "EpisodeSupervisor":
    return EpisodeSupervisor(episode)


class EpisodeSupervisor(LiveSupervisor):
    """The rollout worker's supervisor of a live episode: people's stored commands decide its steps."""

    def __init__(self, episode: Episode):
        self.episode_id = episode.pk
        self.project_id = episode.project_id
        self.mode = episode.mode
        self.deciders: dict[int, object] = {}
        self._listen = psycopg.connect(_conninfo(), autocommit=True)
        self._listen.execute(f'LISTEN "{services.notify_channel(episode.pk)}"')
        self._last_activity = time.monotonic()
        self.answers: dict[int, str] = {}  # step index -> the person's reply to the model's call_user
        self.live: LiveView | None = None
        self.asked: dict[int, str] = {}  # step index -> why the model asked a person about it

    def watch_env(self, env) -> None:
        """Stream this env's screen to the episode's watchers while waiting for a person (the rollout worker
        calls this with the env the episode runs in). ``LOUPE_LIVE_FPS=0`` turns the live view off."""
        if settings.LOUPE_LIVE_FPS <= 0 or type(env).live_frame is Env.live_frame:  # off, or a terminal: no screen
            return
        self.live = LiveView(episode_id=self.episode_id, env=env, fps=settings.LOUPE_LIVE_FPS,
                             max_bytes=settings.LOUPE_LIVE_MAX_FRAME_BYTES)

    def close(self):
        try:
            self._listen.close()
        except Exception:
            pass

    def commands_announced(self) -> bool:
        """Whether a command was announced since the last look, without waiting: the environment service skips
        review() between looks while none was (the episode running, untaken), sparing a step its queries."""
        return any(True for _ in self._listen.notifies(timeout=0, stop_after=1))

    # the rollout loop's hooks -------------------------------------------------------------------
    def actor_for(self, index: int):
        return self.deciders.get(index)

    def answer_call_user(self, index: int, question: str) -> str | None:
        """What the person answered when they approved the model's call_user at step ``index``."""
        return self.answers.pop(index, None) or None

    def step_stored(self, step) -> None:
        services.interventions_link_step(episode_id=self.episode_id, step=step)
        if step.index in self.asked:  # the calibration card counts the steps people decided
            step.info = {**(step.info or {}), "asked": self.asked.pop(step.index)}
            step.save(update_fields=["info"])

    def after_step(self, step) -> None:
        if TranscriptWord.objects.filter(clip__episode_id=self.episode_id, step__isnull=True).exists():
            words_align(episode_id=self.episode_id)  # words of the open step now have their step

    def review(self, index: int, observation, proposal, *, attempt: int = 1, repeated: bool = False,
               confidence=None):
        score = confidence.score if confidence is not None else None
        floor = asking.ask_floor(self.project_id) if self.mode == Mode.AUTONOMOUS else None
        asks = not proposal.is_void and asking.should_ask(mode=self.mode, confidence=score, floor=floor)
        reason = asking.ask_reason(score, floor) if asks else ""
        try:
            return self._review(index, observation, proposal, repeated=repeated, ask=reason, confidence=score)
        finally:
            if asks:
                asking.episode_ask_close(episode_id=self.episode_id)
            if self.live is not None:
                self.live.stop()

    def _review(self, index: int, observation, proposal, *, repeated: bool, ask: str = "",
                confidence: float | None = None):
        """``ask``: why the model asks a person about this proposal ("" when it does not)."""
        opened_as = None  # a proposal is shown again when control changes hands (model <-> person)
        # the episode keeps its instruction redacted (rollouts/privacy.py): compared as it would be stored
        instruction = privacy.text_redact(text=observation.instruction, settings=Episode.objects.filter(
            pk=self.episode_id).values_list("project__settings", flat=True).first())
        while True:
            close_old_connections()
            episode = Episode.objects.get(pk=self.episode_id)
            seen = {}
            if (episode.screen_width, episode.screen_height) != (observation.width, observation.height):
                seen["screen"] = (observation.width, observation.height)
            if observation.instruction and instruction != episode.instruction:
                seen["instruction"] = observation.instruction  # shown above the screen from the first proposal on
            if seen:
                episode = episodes.episode_live_state_set(episode_id=self.episode_id, **seen)  # as it is now
            applied = False
            for command in services.commands_pending(episode_id=self.episode_id):
                self._last_activity, applied = time.monotonic(), True
                decision = self._apply(command, index, proposal)
                if decision is not None:
                    steps.proposal_close(episode=episode)
                    return decision
            if applied:  # a pause, resume, takeover or handback changed it: read it again; else once a tick
                episode.refresh_from_db()
            asks_user = proposal.action is not None and proposal.action.name == "call_user"
            if ask and not episode.human_control and not episode.asked_at:
                episode = asking.episode_ask_open(episode_id=self.episode_id, reason=ask)
                self.asked[index] = ask
                self._last_activity = time.monotonic()  # the idle limit counts from the ask
            if (self.mode == Mode.AUTONOMOUS and episode.status != EpisodeStatus.PAUSED and not episode.human_control
                    and not asks_user):  # an ask paused it above; a person's resume lets the proposal run
                return Decision(kind="approve")
            if asks_user and episode.status != EpisodeStatus.PAUSED and not episode.human_control:
                episodes.episode_live_state_set(episode_id=self.episode_id, status=EpisodeStatus.PAUSED)
            mode = "takeover" if episode.human_control else "review"
            if opened_as != mode:
                # under a takeover this still shows the current screen (and what the model would do)
                reason = "takeover" if episode.human_control else (
                    "call_user" if asks_user else ("unsure" if ask else ""))
                steps.proposal_open(
                    episode=episode, index=index, turn=steps.turn_payload(proposal),
                    screenshot=observation.screenshot, width=observation.width, height=observation.height,
                    url=observation.url, reason=reason, repeated=repeated, confidence=confidence)
                opened_as = mode
                if self.live is not None:
                    self.live.reset()  # the page shows this still now: the next live frame goes out whole
            if time.monotonic() - self._last_activity > settings.LOUPE_SUPERVISED_IDLE_SECONDS:
                raise SupervisorIdle(f"no annotator acted for {settings.LOUPE_SUPERVISED_IDLE_SECONDS:.0f} s")
            self._wait(1.0)

    # ---------------------------------------------------------------------------------------------
    def _wait(self, timeout: float) -> None:
        """Until a command is announced or ``timeout`` passes; meanwhile the live view sends frames when due."""
        deadline = time.monotonic() + timeout
        while True:
            pause = self.live.tick() if self.live is not None else timeout
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if any(True for _ in self._listen.notifies(timeout=max(0.01, min(pause, left)), stop_after=1)):
                return

    def _apply(self, command: Command, index: int, proposal) -> Decision | None:
        """Apply one stored command at this point of the step; a Decision ends the review."""
        at = StepPoint(episode=Episode.objects.get(pk=self.episode_id), index=index, proposal=proposal,
                       deciders=self.deciders, answers=self.answers)
        try:
            if command.type not in COMMANDS:
                raise CommandRefused(f"'{command.type}' cannot be applied now.")
            return COMMANDS[command.type].apply(command, at)
        except CommandRefused as exc:
            command_refuse(command=command, reason=exc.message)
            return None
