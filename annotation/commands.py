"""The kinds of command a person sends a live episode, one class each: what it needs, and what it does.

Every kind is judged twice. `validate(frame, episode)` runs when the command arrives (services.command_submit):
it returns the payload to store, or raises CommandRefused with the message the person reads. `apply(command, at)`
runs later inside the rollout (supervision.EpisodeSupervisor.review), at the point of the step where the stored
command takes effect: it records what happened and returns a Decision when the command decides the step, or
raises CommandRefused when the episode has moved on since (the supervisor refuses the command with that message).
A check both moments make lives once, in the class.

COMMANDS maps each kind to its class; a new kind is a class here and its name in models.CommandType (the column's
choices) and the frontend. Claim and release are not here: they change who steers, never reach the rollout, and
are handled in services.py."""
from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from agent.actions import Action, ActionSyntaxError, Turn, parse_action
from agent.rollout import Decision, human_turn
from annotation.models import Command, CommandStatus, Intervention
from core.audit import audit_record
from core.limits import LABELS, too_long
from rollouts import steps
from rollouts import episodes
from rollouts import privacy
from rollouts.events import event_append
from rollouts.models import Episode, EpisodeStatus

OUTCOMES = ("success", "failure", "infeasible")


class CommandRefused(Exception):
    """A command that cannot be taken (when it arrives) or applied (when its point of the step comes).
    The message is for the person, in plain words."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def step_name(index) -> str:
    """A step as people count it, from 1 ("step 3" for index 2); whatever a client sent, readably."""
    return f"step {index + 1}" if isinstance(index, int) and not isinstance(index, bool) else f"step {index!r}"


@dataclass
class StepPoint:
    """Where the rollout stands when a stored command is applied: the episode as stored now, the step under
    review and its proposal, and what the supervisor keeps for the step (who decided it, the person's answers)."""

    episode: Episode
    index: int
    proposal: Turn
    deciders: dict[int, object]
    answers: dict[int, str]

    @property
    def proposal_dict(self) -> dict | None:
        return steps.turn_payload(self.proposal)


# --- what applying or refusing a stored command records ------------------------------------------
@transaction.atomic
def command_apply(*, command: Command, step_index: int | None = None, proposal: dict | None = None,
                  correction: dict | None = None) -> Intervention:
    """The worker acted on a command: mark it applied and record the intervention (who, what, when). What the
    person typed (a reason, a thought, an action's text) is kept redacted from here on, as the step is: it was
    applied as it came."""
    kept = privacy.value_redact(settings=Episode.objects.filter(pk=command.episode_id).values_list(
        "project__settings", flat=True).first(), value={"payload": command.payload, "proposal": proposal,
                                                        "correction": correction})
    Command.objects.filter(pk=command.pk).update(status=CommandStatus.APPLIED, applied_at=timezone.now(),
                                                 payload=kept["payload"])
    intervention = Intervention.objects.create(episode_id=command.episode_id, step_index=step_index,
                                               command=command, kind=command.type, user=command.user,
                                               proposal=kept["proposal"], correction=kept["correction"])
    audit_record(actor=command.user, action=f"intervention.{command.type}", target=command.episode,
                 data={"step_index": step_index, "command": command.client_id})
    return intervention


@transaction.atomic
def command_refuse(*, command: Command, reason: str) -> None:
    kept = privacy.value_redact(settings=Episode.objects.filter(pk=command.episode_id).values_list(
        "project__settings", flat=True).first(), value=command.payload)  # stored redacted, as an applied one
    Command.objects.filter(pk=command.pk).update(status=CommandStatus.REFUSED, error=reason[:300], payload=kept)
    event_append(episode_id=command.episode_id, type="error",
                 payload={"message": reason, "command": command.client_id, "username": command.user.username})


# --- shared pieces ---------------------------------------------------------------------------------
def _action_of(kind: str, frame: dict, episode: Episode) -> dict:
    """The frame's action, parsed and on the screen, as stored."""
    text = frame.get("action")
    if not isinstance(text, str) or not text.strip():
        raise CommandRefused(f"'{kind}' needs an 'action' like click(x=10, y=20).")
    try:
        action = parse_action(text)
    except ActionSyntaxError as exc:
        raise CommandRefused(f"That action does not parse: {exc}") from None
    args = action.args
    if action.name == "type":
        _check_text("typed_text", args["text"])
    for xk, yk in (("x", "y"), ("x1", "y1"), ("x2", "y2")):
        if xk in args and episode.screen_width and not (0 <= args[xk] < episode.screen_width
                                                         and 0 <= args[yk] < episode.screen_height):
            raise CommandRefused(f"({args[xk]}, {args[yk]}) is outside the {episode.screen_width}x"
                                 f"{episode.screen_height} screenshot.")
    return action.to_dict()


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _payload_turn(payload: dict) -> Turn:
    """A stored command's turn (its action and the person's thought)."""
    return human_turn(Action.from_dict(payload["action"]), payload.get("thought", ""))


def _check_text(kind: str, value) -> str:
    """A text field of a command, whole; CommandRefused naming the field past its limit (core.limits), never cut."""
    if not isinstance(value, str):
        raise CommandRefused(f"{LABELS[kind]} must be text.")
    message = too_long(kind, value)
    if message:
        raise CommandRefused(message)
    return value


class LiveCommand:
    """One kind of command. Subclasses give `kind`, `payload_of` and `apply`."""

    kind: str

    @classmethod
    def validate(cls, frame: dict, episode: Episode) -> dict:
        """The payload to store for this frame, judged against the episode as it is now; CommandRefused if not."""
        thought = _check_text("human_thought", frame.get("thought", ""))
        return cls.payload_of(frame, episode, thought)

    @classmethod
    def payload_of(cls, frame: dict, episode: Episode, thought: str) -> dict:
        return {}

    @classmethod
    def apply(cls, command: Command, at: StepPoint) -> Decision | None:
        """Do the stored command at this point of the step; a Decision ends the review of the step."""
        raise NotImplementedError


# --- the rollout's pace and who acts ---------------------------------------------------------------
class Pause(LiveCommand):
    kind = "pause"

    @classmethod
    def payload_of(cls, frame, episode, thought):
        if episode.status == EpisodeStatus.PAUSED:
            raise CommandRefused("The episode is already paused.")
        return {}

    @classmethod
    def apply(cls, command, at):
        episodes.episode_live_state_set(episode_id=at.episode.pk, status=EpisodeStatus.PAUSED)
        command_apply(command=command)
        return None


class Resume(LiveCommand):
    kind = "resume"

    @classmethod
    def payload_of(cls, frame, episode, thought):
        if episode.status != EpisodeStatus.PAUSED:
            raise CommandRefused("The episode is not paused.")
        return {}

    @classmethod
    def apply(cls, command, at):
        episodes.episode_live_state_set(episode_id=at.episode.pk, status=EpisodeStatus.RUNNING)
        command_apply(command=command)
        return None


class Takeover(LiveCommand):
    kind = "takeover"

    @classmethod
    def payload_of(cls, frame, episode, thought):
        if episode.human_control:
            raise CommandRefused("You already have taken over.")
        return {}

    @classmethod
    def apply(cls, command, at):
        episodes.episode_live_state_set(episode_id=at.episode.pk, human_control=True,
                                                 status=EpisodeStatus.RUNNING)
        command_apply(command=command, step_index=at.index, proposal=at.proposal_dict)
        return None


class Act(LiveCommand):
    """The person's own turn, under a takeover."""

    kind = "act"

    @staticmethod
    def _check_control(episode: Episode) -> None:
        if not episode.human_control:
            raise CommandRefused("Take over first: the model is acting.")

    @classmethod
    def payload_of(cls, frame, episode, thought):
        cls._check_control(episode)
        return {"action": _action_of(cls.kind, frame, episode), "thought": thought}

    @classmethod
    def apply(cls, command, at):
        cls._check_control(at.episode)
        turn = _payload_turn(command.payload)
        command_apply(command=command, step_index=at.index, proposal=at.proposal_dict,
                      correction=steps.turn_payload(turn))
        at.deciders[at.index] = command.user
        if at.episode.status == EpisodeStatus.PAUSED:
            episodes.episode_live_state_set(episode_id=at.episode.pk, status=EpisodeStatus.RUNNING)
        return Decision(kind="act", turn=turn)


class Handback(LiveCommand):
    kind = "handback"

    @classmethod
    def payload_of(cls, frame, episode, thought):
        if not episode.human_control:
            raise CommandRefused("The model is already acting.")
        return {}

    @classmethod
    def apply(cls, command, at):
        episodes.episode_live_state_set(episode_id=at.episode.pk, human_control=False,
                                                 status=EpisodeStatus.RUNNING)
        command_apply(command=command, step_index=at.index)
        return None


class Finish(LiveCommand):
    kind = "finish"

    @classmethod
    def payload_of(cls, frame, episode, thought):
        outcome = frame.get("outcome")
        if outcome not in OUTCOMES:
            raise CommandRefused(f"'finish' needs an outcome: one of {', '.join(OUTCOMES)}.")
        return {"outcome": outcome, "comment": _check_text("finish_comment", frame.get("comment", ""))}

    @classmethod
    def apply(cls, command, at):
        payload = command.payload
        episodes.episode_outcome_set(episode_id=at.episode.pk, outcome=payload["outcome"],
                                              comment=payload.get("comment", ""))
        command_apply(command=command, step_index=at.index)
        return Decision(kind="finish", outcome=payload["outcome"])


# --- answers to the open proposal --------------------------------------------------------------------
class ProposalAnswer(LiveCommand):
    """Approve, edit and reject answer one proposal: the one open when sent, and still open when applied."""

    @classmethod
    def payload_of(cls, frame, episode, thought):
        index = frame.get("index", episode.pending_index)
        if episode.pending_index is None:
            raise CommandRefused("Nothing is proposed right now; wait for the next proposal.")
        if index != episode.pending_index:
            raise CommandRefused(f"The proposal for {step_name(index)} was already decided; the open one is for "
                                 f"{step_name(episode.pending_index)}.")
        return {"index": index}

    @classmethod
    def apply(cls, command, at):
        index = command.payload.get("index")
        if at.episode.human_control or index != at.index:
            raise CommandRefused(f"The proposal for {step_name(index)} is no longer open.")
        decision = cls.answer(command, at)
        at.deciders[at.index] = command.user  # a rejecter too (the worker stores the rejection), until someone decides
        return decision

    @classmethod
    def answer(cls, command: Command, at: StepPoint) -> Decision:
        raise NotImplementedError


class Approve(ProposalAnswer):
    kind = "approve"

    @classmethod
    def payload_of(cls, frame, episode, thought):
        payload = super().payload_of(frame, episode, thought)
        if "answer" in frame:  # the person's reply when the model asked them (call_user)
            payload["answer"] = _check_text("call_user_answer", frame["answer"]).strip()
        return payload

    @classmethod
    def answer(cls, command, at):
        if at.proposal.is_void:
            raise CommandRefused("The model's answer could not be read as an action, so it cannot be approved: "
                                 "edit it or reject it.")
        command_apply(command=command, step_index=at.index, proposal=at.proposal_dict)
        if command.payload.get("answer") and at.proposal.action.name == "call_user":
            at.answers[at.index] = command.payload["answer"]
        return Decision(kind="approve")


class Edit(ProposalAnswer):
    kind = "edit"

    @classmethod
    def payload_of(cls, frame, episode, thought):
        payload = super().payload_of(frame, episode, thought)
        payload.update(action=_action_of(cls.kind, frame, episode), thought=thought)
        return payload

    @classmethod
    def answer(cls, command, at):
        turn = _payload_turn(command.payload)
        if turn.thought and _same_text(turn.thought, at.proposal.thought) and (
                at.proposal.action is None or turn.action.to_dict() != at.proposal.action.to_dict()):
            # the action changed but the thought is the model's: kept as the person's, it would pass the model's
            # reasoning off as theirs (the "chosen" side of a preference pair). It stays on the proposal; the
            # person's turn keeps no thought.
            turn = _payload_turn({"action": command.payload["action"], "thought": ""})
        command_apply(command=command, step_index=at.index, proposal=at.proposal_dict,
                      correction=steps.turn_payload(turn))
        return Decision(kind="edit", turn=turn)


class Reject(ProposalAnswer):
    kind = "reject"

    @classmethod
    def payload_of(cls, frame, episode, thought):
        payload = super().payload_of(frame, episode, thought)
        payload["reason"] = _check_text("reject_reason", frame.get("reason", ""))
        return payload

    @classmethod
    def answer(cls, command, at):
        command_apply(command=command, step_index=at.index, proposal=at.proposal_dict)
        return Decision(kind="reject", reason=command.payload.get("reason") or "")


# In models.CommandType's order: the "Unknown command type" message lists them so.
COMMANDS: dict[str, type[LiveCommand]] = {c.kind: c for c in (Pause, Resume, Approve, Edit, Reject, Takeover, Act,
                                                               Handback, Finish)}
