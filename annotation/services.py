"""The human layer's writes: commands from the live session, stored before anything acts on them.

A command is validated against the episode's current state, stored with its client id (so a
re-sent id changes nothing), then delivered to the rollout worker by PostgreSQL NOTIFY in the same
transaction: nothing a person did exists only in Redis or in memory."""
from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from annotation.models import Command, CommandStatus, CommandType, Intervention
from flywheel import services as flywheel_services
from flywheel.models import Episode, EpisodeStatus, Role
from flywheel.selectors import project_role, role_at_least
from core.audit import audit_record

CONTROL_COMMANDS = ("claim", "release")
WORKER_COMMANDS = tuple(c for c in CommandType.values if c not in CONTROL_COMMANDS)
OUTCOMES = ("success", "failure", "infeasible")
MAX_TEXT = 2000


@dataclass
class CommandResult:
    ok: bool
    message: dict          # what to send back to this client: an ack or an error
    duplicate: bool = False


def step_name(index) -> str:
    """A step as people count it, from 1 ("step 3" for index 2); whatever a client sent, readably."""
    return f"step {index + 1}" if isinstance(index, int) and not isinstance(index, bool) else f"step {index!r}"


def notify_channel(episode_id: int) -> str:
    return f"loupe_episode_{episode_id}"


def _error(message: str, command_id: str | None) -> CommandResult:
    return CommandResult(False, {"type": "error", "id": command_id, "data": {"message": message}})


def _ack(command: Command, duplicate: bool = False) -> CommandResult:
    return CommandResult(True, {"type": "ack", "id": command.client_id, "status": command.status,
                                "command": command.type, "duplicate": duplicate}, duplicate)


def _validate_payload(kind: str, frame: dict, episode: Episode) -> tuple[dict, str | None]:
    """The stored payload for a command, or an error message."""
    from agent.actions import ActionSyntaxError, parse_action

    def action_of(field: str = "action"):
        text = frame.get(field)
        if not isinstance(text, str) or not text.strip():
            return None, f"'{kind}' needs an '{field}' like click(x=10, y=20)."
        try:
            action = parse_action(text)
        except ActionSyntaxError as exc:
            return None, f"That action does not parse: {exc}"
        args = action.args
        for xk, yk in (("x", "y"), ("x1", "y1"), ("x2", "y2")):
            if xk in args and episode.screen_width and not (0 <= args[xk] < episode.screen_width
                                                             and 0 <= args[yk] < episode.screen_height):
                return None, (f"({args[xk]}, {args[yk]}) is outside the {episode.screen_width}x"
                              f"{episode.screen_height} screenshot.")
        return action.to_dict(), None

    thought = frame.get("thought", "")
    if not isinstance(thought, str) or len(thought) > MAX_TEXT:
        return {}, f"'thought' must be text of at most {MAX_TEXT} characters."
    if kind in ("approve", "edit", "reject"):
        index = frame.get("index", episode.pending_index)
        if episode.pending_index is None:
            return {}, "Nothing is proposed right now; wait for the next proposal."
        if index != episode.pending_index:
            return {}, (f"The proposal for {step_name(index)} was already decided; the open one is for "
                        f"{step_name(episode.pending_index)}.")
        payload: dict = {"index": index}
        if kind == "edit":
            action, error = action_of()
            if error:
                return {}, error
            payload.update(action=action, thought=thought)
        if kind == "reject":
            reason = frame.get("reason", "")
            payload["reason"] = reason[:MAX_TEXT] if isinstance(reason, str) else ""
        if kind == "approve" and "answer" in frame:  # the person's reply when the model asked them (call_user)
            answer = frame["answer"]
            if not isinstance(answer, str) or len(answer) > MAX_TEXT:
                return {}, f"'answer' must be text of at most {MAX_TEXT} characters."
            payload["answer"] = answer.strip()
        return payload, None
    if kind == "act":
        if not episode.human_control:
            return {}, "Take over first: the model is acting."
        action, error = action_of()
        return ({"action": action, "thought": thought}, None) if not error else ({}, error)
    if kind == "takeover" and episode.human_control:
        return {}, "You already have taken over."
    if kind == "handback" and not episode.human_control:
        return {}, "The model is already acting."
    if kind == "pause" and episode.status == EpisodeStatus.PAUSED:
        return {}, "The episode is already paused."
    if kind == "resume" and episode.status != EpisodeStatus.PAUSED:
        return {}, "The episode is not paused."
    if kind == "finish":
        outcome = frame.get("outcome")
        if outcome not in OUTCOMES:
            return {}, f"'finish' needs an outcome: one of {', '.join(OUTCOMES)}."
        comment = frame.get("comment", "")
        return {"outcome": outcome, "comment": comment[:MAX_TEXT] if isinstance(comment, str) else ""}, None
    return {}, None


def _has_nul(value) -> bool:
    """PostgreSQL stores no NUL character in text or JSON; a frame holding one is refused, not a database error."""
    stack = [value]  # iterative: a frame may nest as deep as the JSON parser allows
    while stack:
        item = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def command_submit(*, episode_id: int, user, frame: dict) -> CommandResult:
    command_id = frame.get("id")
    kind = frame.get("type")
    if not isinstance(command_id, str) or not 1 <= len(command_id) <= 64 or "\x00" in command_id:
        return _error("Every command needs a client 'id' (a string of 1-64 characters).", None)
    if _has_nul(frame):
        return _error("Text in a command may not contain NUL characters.", command_id)
    if kind not in WORKER_COMMANDS and kind not in CONTROL_COMMANDS:
        known = ", ".join((*WORKER_COMMANDS, *CONTROL_COMMANDS))
        return _error(f"Unknown command type '{kind}'; use one of {known}.", command_id)
    with transaction.atomic():
        episode = Episode.objects.select_for_update(of=("self",)).select_related("controller").get(pk=episode_id)
        existing = Command.objects.filter(episode=episode, client_id=command_id).first()
        if existing is not None:
            return _ack(existing, duplicate=True)
        if episode.status in (EpisodeStatus.FINISHED, EpisodeStatus.FAILED, EpisodeStatus.INTERRUPTED):
            return _error(f"This episode is {episode.status}; it takes no more commands.", command_id)
        role = project_role(user=user, project=episode.project_id)
        if kind in CONTROL_COMMANDS:
            return _control(episode, user, role, kind, command_id)
        if episode.controller_id is None:
            flywheel_services.episode_control_set(episode_id=episode.pk, controller=user)
            episode.controller_id = user.pk
        elif episode.controller_id != user.pk:
            return _error(f"{episode.controller.username} controls this episode; you are watching. "
                          "Ask them to release it" + (", or claim it as a manager." if role_at_least(role, Role.MANAGER) else "."),
                          command_id)
        payload, error = _validate_payload(kind, frame, episode)
        if error:
            return _error(error, command_id)
        command = Command.objects.create(episode=episode, client_id=command_id, user=user, type=kind, payload=payload,
                                         step_index=payload.get("index"))
        with connection.cursor() as cursor:  # delivered to the worker when this transaction commits
            cursor.execute("SELECT pg_notify(%s, %s)", [notify_channel(episode.pk), str(command.pk)])
        return _ack(command)


def _control(episode: Episode, user, role: str | None, kind: str, command_id: str) -> CommandResult:
    if kind == "claim":
        if episode.controller_id not in (None, user.pk) and not role_at_least(role, Role.MANAGER):
            return _error(f"{episode.controller.username} controls this episode; ask them to release it.", command_id)
        new_controller = user
    else:
        if episode.controller_id != user.pk:
            return _error("You do not control this episode.", command_id)
        new_controller = None
    command = Command.objects.create(episode=episode, client_id=command_id, user=user, type=kind, payload={}, status=CommandStatus.APPLIED,
                                     applied_at=timezone.now())
    flywheel_services.episode_control_set(episode_id=episode.pk, controller=new_controller)
    audit_record(actor=user, action=f"control.{kind}", target=f"episode:{episode.pk}", project_id=episode.project_id)
    return _ack(command)


# --- the worker's side ---------------------------------------------------------------------------
def commands_pending(*, episode_id: int) -> list[Command]:
    return list(Command.objects.filter(episode_id=episode_id, status=CommandStatus.ACCEPTED)
                .select_related("user").order_by("id"))


@transaction.atomic
def command_apply(*, command: Command, step_index: int | None = None, proposal: dict | None = None,
                  correction: dict | None = None) -> Intervention:
    """The worker acted on a command: mark it applied and record the intervention (who, what, when)."""
    Command.objects.filter(pk=command.pk).update(status=CommandStatus.APPLIED, applied_at=timezone.now())
    intervention = Intervention.objects.create(episode_id=command.episode_id, step_index=step_index,
                                               command=command, kind=command.type, user=command.user,
                                               proposal=proposal, correction=correction)
    audit_record(actor=command.user, action=f"intervention.{command.type}", target=command.episode,
                 data={"step_index": step_index, "command": command.client_id})
    return intervention


@transaction.atomic
def command_refuse(*, command: Command, reason: str) -> None:
    from flywheel.events import event_append

    Command.objects.filter(pk=command.pk).update(status=CommandStatus.REFUSED, error=reason[:300])
    event_append(episode_id=command.episode_id, type="error",
                 payload={"message": reason, "command": command.client_id, "username": command.user.username})


def interventions_link_step(*, episode_id: int, step) -> None:
    Intervention.objects.filter(episode_id=episode_id, step_index=step.index, step__isnull=True).update(step=step)
