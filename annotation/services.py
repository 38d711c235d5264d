"""The human layer's writes: commands from the live session, stored before anything acts on them.

A command is validated against the episode's current state (each kind by its class in
annotation/commands.py; claim and release, which change who steers, here), stored with its client id (so a
re-sent id changes nothing), and once committed the rollout worker is woken by PostgreSQL NOTIFY (it also reads
the stored commands every second): nothing a person did exists only in Redis or in memory."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from annotation.commands import COMMANDS, CommandRefused
from annotation.live_db import after_reply
from annotation.models import Command, CommandStatus, Intervention
from rollouts import episodes
from rollouts.models import Episode, EpisodeStatus
from projects.models import Membership, Role
from projects.selectors import role_at_least
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


def _episode_locked(*, episode_id: int, user, command_id: str) -> Episode:
    """The episode, locked for this transaction, in one query with what a command needs to know besides:
    `existing_command`, the id of a command already stored under this client id (or None), and `member_role`, the
    user's role in the project by membership (or None; staff are admins everywhere, as in
    projects.selectors.project_role). One round trip instead of three: the command path runs for every approve of
    every annotator.

    The statement is written once (_locked_sql), not built by the ORM on each call: building and compiling the
    query was half of a command's CPU time, and a daphne serves a burst of commands one after another on its one
    interpreter (README, Sizing: the live sockets). The controller is read
    only to name them in a refusal (a query then)."""
    found = list(Episode.objects.raw(_locked_sql(), [command_id, user.pk, episode_id]))
    if not found:
        raise Episode.DoesNotExist(f"Episode {episode_id} does not exist.")
    return found[0]


@functools.cache
def _locked_sql() -> str:
    episode, command, membership = Episode._meta, Command._meta, Membership._meta
    column = {name: episode.get_field(name).column for name in ("id", "project")}
    return (f'SELECT e.*, (SELECT c."{command.pk.column}" FROM "{command.db_table}" c '
            f'WHERE c."{command.get_field("episode").column}" = e."{column["id"]}" '
            f'AND c."{command.get_field("client_id").column}" = %s LIMIT 1) AS existing_command, '
            f'(SELECT m."{membership.get_field("role").column}" FROM "{membership.db_table}" m '
            f'WHERE m."{membership.get_field("project").column}" = e."{column["project"]}" '
            f'AND m."{membership.get_field("user").column}" = %s LIMIT 1) AS member_role '
            f'FROM "{episode.db_table}" e WHERE e."{column["id"]}" = %s FOR UPDATE OF e')


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
        episode = _episode_locked(episode_id=episode_id, user=user, command_id=command_id)
        if episode.existing_command is not None:
            return _ack(Command.objects.get(pk=episode.existing_command), duplicate=True)
        if episode.status in (EpisodeStatus.FINISHED, EpisodeStatus.FAILED, EpisodeStatus.INTERRUPTED):
            return _error(f"This episode is {episode.status}; it takes no more commands.", command_id)
        role = Role.ADMIN if user.is_staff else episode.member_role
        if role is None:
            return _error("You are no longer a member of this episode's project; it takes no commands from you.",
                          command_id)
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
        # after the ack on a live socket (annotation/live_db.after_reply): the ack waits for the stored command only
        transaction.on_commit(functools.partial(after_reply, functools.partial(
            _worker_wake, episode_id=episode.pk, command_id=command.pk)), robust=True)
        return _ack(command)


def _worker_wake(*, episode_id: int, command_id: int) -> None:
    """NOTIFY the episode's rollout worker of a committed command, in a transaction of its own.

    Not inside the command's transaction: PostgreSQL commits notifying transactions one at a time, each holding a
    cluster-wide lock through its WAL flush, so commands sent at once were acknowledged one flush apart. On a live
    socket it runs after the ack (live_db.after_reply). The wake-up needs no durability of its own
    (synchronous_commit off for it): the command is already stored, and the worker reads the stored commands at
    least every second, so a lost wake-up (this process dying between the two commits, or after the ack) costs
    that second, never the command."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('synchronous_commit', 'off', true), pg_notify(%s, %s)",
                       [notify_channel(episode_id), str(command_id)])


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
