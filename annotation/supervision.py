"""The supervisor hook of the rollout loop, run inside the rollout worker.

Before each step executes, the loop asks `review()`. Commands that people sent over the WebSocket
were stored by annotation/services.py and announced with PostgreSQL NOTIFY; here the worker wakes
on that notification, reads the stored commands in order and applies them at this point of the
step: approve / edit / reject the proposal, pause / resume, take over and act, hand back, finish.
In autonomous mode the proposal runs at once unless someone paused or took over."""
from __future__ import annotations

import logging
import time

import psycopg
from django.conf import settings
from django.db import close_old_connections

from annotation import services
from annotation.models import Command
from flywheel import services as flywheel_services
from flywheel.models import Episode, EpisodeStatus, Mode
from flywheel.rollout_worker import EpisodeStop

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


class EpisodeSupervisor:
    def __init__(self, episode: Episode):
        self.episode_id = episode.pk
        self.mode = episode.mode
        self.deciders: dict[int, object] = {}
        self._listen = psycopg.connect(_conninfo(), autocommit=True)
        self._listen.execute(f'LISTEN "{services.notify_channel(episode.pk)}"')
        self._last_activity = time.monotonic()
        self.answers: dict[int, str] = {}  # step index -> the person's reply to the model's call_user

    def close(self):
        try:
            self._listen.close()
        except Exception:
            pass

    # the rollout loop's hooks -------------------------------------------------------------------
    def actor_for(self, index: int):
        return self.deciders.get(index)

    def answer_call_user(self, index: int, question: str) -> str | None:
        """What the person answered when they approved the model's call_user at step ``index``."""
        return self.answers.pop(index, None) or None

    def after_step(self, step) -> None:
        services.interventions_link_step(episode_id=self.episode_id, step=step)
        from annotation.audio import words_align
        from annotation.models import TranscriptWord

        if TranscriptWord.objects.filter(clip__episode_id=self.episode_id, step__isnull=True).exists():
            words_align(episode_id=self.episode_id)  # words of the open step now have their step

    def review(self, index: int, observation, proposal, *, attempt: int = 1, repeated: bool = False):
        from agent.rollout import Decision

        opened_as = None  # a proposal is shown again when control changes hands (model <-> person)
        while True:
            close_old_connections()
            episode = Episode.objects.get(pk=self.episode_id)
            if (episode.screen_width, episode.screen_height) != (observation.width, observation.height):
                flywheel_services.episode_live_state_set(episode_id=self.episode_id,
                                                         screen=(observation.width, observation.height))
            for command in services.commands_pending(episode_id=self.episode_id):
                self._last_activity = time.monotonic()
                decision = self._apply(command, index, proposal, Decision)
                if decision is not None:
                    flywheel_services.proposal_close(episode=episode)
                    return decision
            episode.refresh_from_db()
            asks_user = proposal.action is not None and proposal.action.name == "call_user"
            if (self.mode == Mode.AUTONOMOUS and episode.status != EpisodeStatus.PAUSED and not episode.human_control
                    and not asks_user):
                return Decision(kind="approve")
            if asks_user and episode.status != EpisodeStatus.PAUSED and not episode.human_control:
                flywheel_services.episode_live_state_set(episode_id=self.episode_id, status=EpisodeStatus.PAUSED)
            mode = "takeover" if episode.human_control else "review"
            if opened_as != mode:
                # under a takeover this still shows the current screen (and what the model would do)
                reason = "takeover" if episode.human_control else ("call_user" if asks_user else "")
                flywheel_services.proposal_open(
                    episode=episode, index=index, turn=flywheel_services.turn_payload(proposal),
                    screenshot=observation.screenshot, width=observation.width, height=observation.height,
                    url=observation.url, reason=reason, repeated=repeated)
                opened_as = mode
            if time.monotonic() - self._last_activity > settings.LOUPE_SUPERVISED_IDLE_SECONDS:
                raise SupervisorIdle(f"no annotator acted for {settings.LOUPE_SUPERVISED_IDLE_SECONDS:.0f} s")
            self._wait(1.0)

    # ---------------------------------------------------------------------------------------------
    def _wait(self, timeout: float) -> None:
        for _ in self._listen.notifies(timeout=timeout, stop_after=1):
            pass

    def _apply(self, command: Command, index: int, proposal, Decision):
        """Apply one stored command at this point of the step; a Decision ends the review."""
        from agent.actions import Action, Turn, format_turn

        kind, payload = command.type, command.payload
        proposal_dict = flywheel_services.turn_payload(proposal)
        episode = Episode.objects.get(pk=self.episode_id)

        def human_turn() -> Turn:
            action = Action.from_dict(payload["action"])
            thought = payload.get("thought", "")
            return Turn(thought=thought, action=action, void_reason=None, raw=format_turn(thought, action))

        if kind == "pause":
            flywheel_services.episode_live_state_set(episode_id=self.episode_id, status=EpisodeStatus.PAUSED)
            services.command_apply(command=command)
            return None
        if kind == "resume":
            flywheel_services.episode_live_state_set(episode_id=self.episode_id, status=EpisodeStatus.RUNNING)
            services.command_apply(command=command)
            return None
        if kind == "takeover":
            flywheel_services.episode_live_state_set(episode_id=self.episode_id, human_control=True,
                                                     status=EpisodeStatus.RUNNING)
            services.command_apply(command=command, step_index=index, proposal=proposal_dict)
            return None
        if kind == "handback":
            flywheel_services.episode_live_state_set(episode_id=self.episode_id, human_control=False,
                                                     status=EpisodeStatus.RUNNING)
            services.command_apply(command=command, step_index=index)
            return None
        if kind == "finish":
            flywheel_services.episode_outcome_set(episode_id=self.episode_id, outcome=payload["outcome"],
                                                  comment=payload.get("comment", ""))
            services.command_apply(command=command, step_index=index)
            return Decision(kind="finish", outcome=payload["outcome"])
        if kind == "act":
            if not episode.human_control:
                services.command_refuse(command=command, reason="Take over first: the model is acting.")
                return None
            turn = human_turn()
            services.command_apply(command=command, step_index=index, proposal=proposal_dict,
                                   correction=flywheel_services.turn_payload(turn))
            self.deciders[index] = command.user
            if episode.status == EpisodeStatus.PAUSED:
                flywheel_services.episode_live_state_set(episode_id=self.episode_id, status=EpisodeStatus.RUNNING)
            return Decision(kind="act", turn=turn)
        # approve / edit / reject answer one proposal
        if episode.human_control or payload.get("index") != index:
            services.command_refuse(command=command, reason=f"The proposal for {services.step_name(payload.get('index'))} "
                                                            "is no longer open.")
            return None
        if kind == "approve":
            if proposal.is_void:
                services.command_refuse(command=command, reason="The model's answer could not be read as an action, so "
                                                                "it cannot be approved: edit it or reject it.")
                return None
            services.command_apply(command=command, step_index=index, proposal=proposal_dict)
            self.deciders[index] = command.user
            if payload.get("answer") and proposal.action.name == "call_user":
                self.answers[index] = payload["answer"]
            return Decision(kind="approve")
        if kind == "edit":
            turn = human_turn()
            if not turn.thought:
                turn = Turn(thought=proposal.thought, action=turn.action, void_reason=None,
                            raw=format_turn(proposal.thought, turn.action))
            services.command_apply(command=command, step_index=index, proposal=proposal_dict,
                                   correction=flywheel_services.turn_payload(turn))
            self.deciders[index] = command.user
            return Decision(kind="edit", turn=turn)
        if kind == "reject":
            services.command_apply(command=command, step_index=index, proposal=proposal_dict)
            self.deciders[index] = command.user  # who rejected it (the worker stores the rejection), until
            return Decision(kind="reject", reason=payload.get("reason") or "")  # someone decides the step
        services.command_refuse(command=command, reason=f"'{kind}' cannot be applied now.")
        return None
