"""The human layer's writes: commands from the live session, stored before anything acts on them.

A command is validated against the episode's current state (each kind by its class in
annotation/commands.py; claim and release, which change who steers, here), stored with its client id (so a
re-sent id changes nothing), then delivered to the rollout worker by PostgreSQL NOTIFY in the same
transaction: nothing a person did exists only in Redis or in memory."""
from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from annotation.commands import COMMANDS, CommandRefused
from annotation.models import Command, CommandStatus, Intervention
from flywheel import episodes
from flywheel.models import Episode, EpisodeStatus, Role
from flywheel.selectors import project_role, role_at_least
from core.audit import audit_record

CONTROL_COMMANDS = ("claim", "release")  # who steers: handled here, never sent to the rollout worker
WORKER_COMMANDS = tuple(COMMANDS)


@dataclass
class CommandResult:
    ok: bool
    message: dict          # what to send back to this client: an ack or an error
    duplicate: bool = False


def notify_channel(episode_id: int) -> str:
    return f"loupe_episode_{episode_id}"


def _error(message: str, command_id: str | None) -> CommandResult:
    return CommandResult(False, {"type": "error", "id": command_id, "data": {"message": message}})


def _ack(command: Command, duplicate: bool = False) -> CommandResult:
    return CommandResult(True, {"type": "ack", "id": command.client_id, "status": command.status,
                                "command": command.type, "duplicate": duplicate}, duplicate)


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
            episodes.episode_control_set(episode_id=episode.pk, controller=user)
            episode.controller_id = user.pk
        elif episode.controller_id != user.pk:
            return _error(f"{episode.controller.username} controls this episode; you are watching. "
                          "Ask them to release it" + (", or claim it as a manager." if role_at_least(role, Role.MANAGER) else "."),
                          command_id)
        try:
            payload = COMMANDS[kind].validate(frame, episode)
        except CommandRefused as exc:
            return _error(exc.message, command_id)
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
    episodes.episode_control_set(episode_id=episode.pk, controller=new_controller)
    audit_record(actor=user, action=f"control.{kind}", target=f"episode:{episode.pk}", project_id=episode.project_id)
    return _ack(command)


# --- the worker's side ---------------------------------------------------------------------------
def commands_pending(*, episode_id: int) -> list[Command]:
    return list(Command.objects.filter(episode_id=episode_id, status=CommandStatus.ACCEPTED)
                .select_related("user").order_by("id"))


def interventions_link_step(*, episode_id: int, step) -> None:
    Intervention.objects.filter(episode_id=episode_id, step_index=step.index, step__isnull=True).update(step=step)
