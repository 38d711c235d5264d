"""Each kind of live command in the registry (annotation/commands.py) takes a good frame and refuses a bad one
with the message a person reads; the checks that validation and application share refuse the same at both."""
import pytest

from agent.actions import Action, Turn
from annotation.commands import COMMANDS, CommandRefused, StepPoint
from annotation.models import Command, CommandType
from annotation.services import CONTROL_COMMANDS, command_submit
from rollouts.models import Episode, EpisodeStatus
from tests.factories import make_member, make_project, make_task, make_user

pytestmark = pytest.mark.django_db

CLICK = {"name": "click", "args": {"x": 10, "y": 20}}

# kind: (episode state, good frame, its stored payload, bad episode state, bad frame, the refusal)
CASES = {
    "pause": ({}, {}, {}, {"status": EpisodeStatus.PAUSED}, {}, "The episode is already paused."),
    "resume": ({"status": EpisodeStatus.PAUSED}, {}, {}, {}, {}, "The episode is not paused."),
    "approve": ({"pending_index": 2}, {"index": 2, "answer": " The blue one. "},
                {"index": 2, "answer": "The blue one."},
                {"pending_index": None}, {"index": 2}, "Nothing is proposed right now; wait for the next proposal."),
    "edit": ({"pending_index": 0}, {"index": 0, "action": "click(x=10, y=20)", "thought": "The corner."},
             {"index": 0, "action": CLICK, "thought": "The corner."},
             {"pending_index": 0}, {"index": 0, "action": "click(x=500, y=20)"},
             "(500, 20) is outside the 100x80 screenshot."),
    "reject": ({"pending_index": 1}, {"index": 1, "reason": "r" * 4000}, {"index": 1, "reason": "r" * 4000},
               {"pending_index": 2}, {"index": 1},
               "The proposal for step 2 was already decided; the open one is for step 3."),
    "takeover": ({}, {}, {}, {"human_control": True}, {}, "You already have taken over."),
    "act": ({"human_control": True}, {"action": "click(x=10, y=20)"}, {"action": CLICK, "thought": ""},
            {}, {"action": "click(x=10, y=20)"}, "Take over first: the model is acting."),
    "handback": ({"human_control": True}, {}, {}, {}, {}, "The model is already acting."),
    "finish": ({}, {"outcome": "success", "comment": "Done."}, {"outcome": "success", "comment": "Done."},
               {}, {"outcome": "maybe"}, "'finish' needs an outcome: one of success, failure, infeasible."),
}


def _episode(**state) -> Episode:
    project = make_project()
    fields = {"status": EpisodeStatus.RUNNING, "mode": "supervised", "screen_width": 100, "screen_height": 80, **state}
    return Episode.objects.create(project=project, task=make_task(project), seed=1, **fields)


def test_every_kind_has_a_case_and_the_registry_is_the_stored_types_the_worker_applies():
    assert set(CASES) == set(COMMANDS)
    # the registry's order is CommandType's: the "Unknown command type" message lists them so
    assert list(COMMANDS) == [t for t in CommandType.values if t not in CONTROL_COMMANDS]
    assert all(cls.kind == kind for kind, cls in COMMANDS.items())


@pytest.mark.parametrize("kind", list(CASES))
def test_a_kind_takes_a_good_frame_and_refuses_a_bad_one(kind):
    good_state, good_frame, payload, bad_state, bad_frame, message = CASES[kind]
    assert COMMANDS[kind].validate({"type": kind, "id": "c1", **good_frame}, _episode(**good_state)) == payload
    with pytest.raises(CommandRefused) as refused:
        COMMANDS[kind].validate({"type": kind, "id": "c2", **bad_frame}, _episode(**bad_state))
    assert refused.value.message == message


@pytest.mark.parametrize("kind", list(CASES))
def test_every_kind_refuses_a_thought_too_long(kind):
    good_state, good_frame = CASES[kind][:2]
    with pytest.raises(CommandRefused) as refused:
        COMMANDS[kind].validate({**good_frame, "thought": "t" * 10_001}, _episode(**good_state))
    assert refused.value.message == ("The thought is 10,001 characters long; the limit is 10,000. Shorten it and send "
                                     "it again: nothing was saved.")


@pytest.mark.parametrize("kind, frame, limit", [
    ("reject", {"index": 1, "reason": "r" * 4001}, "The reason is 4,001 characters long; the limit is 4,000."),
    ("finish", {"outcome": "success", "comment": "c" * 10_001}, "The comment is 10,001 characters long; the limit is 10,000."),
    ("approve", {"index": 2, "answer": "a" * 4001}, "The answer is 4,001 characters long; the limit is 4,000."),
    ("act", {"action": f'type(text="{"x" * 10_001}")'}, "The text to type is 10,001 characters long; the limit is 10,000."),
])
def test_text_past_its_limit_is_refused_with_its_length_never_cut(kind, frame, limit):
    state = CASES[kind][0]
    with pytest.raises(CommandRefused) as refused:
        COMMANDS[kind].validate(frame, _episode(**state))
    assert refused.value.message.startswith(limit)
    long_field = max(frame, key=lambda key: len(str(frame[key])))
    at_limit = {**frame, long_field: frame[long_field].replace("x" * 10_001, "x" * 10_000) if kind == "act"
                else frame[long_field][:-1]}
    stored = COMMANDS[kind].validate(at_limit, _episode(**state))
    kept = stored[long_field]["args"]["text"] if kind == "act" else stored[long_field]
    assert len(kept) == len(at_limit[long_field]) - (len('type(text="")') if kind == "act" else 0)  # whole


def test_an_edit_that_changes_only_the_action_keeps_none_of_the_models_thought():
    episode = _episode(pending_index=0)
    user = make_user()
    model = Turn(thought="Click the logo.", action=Action.from_dict(CLICK), void_reason=None,
                 raw="Thought: Click the logo.\nAction: click(x=10, y=20)")
    moved = {"name": "click", "args": {"x": 30, "y": 40}}
    cases = [("Click the logo.", ""), ("  Click   the logo. ", ""), ("The OK button is lower.", "The OK button is lower."),
             ("", "")]
    for sent, kept in cases:
        command = Command.objects.create(episode=episode, user=user, type="edit", client_id=f"e{len(sent)}",
                                         payload={"index": 0, "action": moved, "thought": sent})
        decision = COMMANDS["edit"].apply(command, _at(episode, 0, model))
        assert (decision.turn.thought, decision.turn.action.to_dict()) == (kept, moved)
    # a thought-only edit of the model's own action keeps the person's words
    command = Command.objects.create(episode=episode, user=user, type="edit", client_id="t",
                                     payload={"index": 0, "action": CLICK, "thought": "Click the logo."})
    assert COMMANDS["edit"].apply(command, _at(episode, 0, model)).turn.thought == "Click the logo."


@pytest.mark.parametrize("kind, bad_frame, message", [
    ("edit", {"index": 0}, "'edit' needs an 'action' like click(x=10, y=20)."),
    ("act", {"action": "clack(x=1)"},
     "That action does not parse: unknown action 'clack'; expected one of: click, double_click, right_click, drag, "
     "type, hotkey, scroll, wait, finished, call_user, shell"),
])
def test_an_action_is_needed_and_must_parse(kind, bad_frame, message):
    with pytest.raises(CommandRefused) as refused:
        COMMANDS[kind].validate(bad_frame, _episode(pending_index=0, human_control=True))
    assert refused.value.message == message


def _at(episode: Episode, index: int, proposal: Turn | None = None) -> StepPoint:
    proposal = proposal or Turn(thought="", action=Action.from_dict(CLICK), void_reason=None, raw="")
    return StepPoint(episode=episode, index=index, proposal=proposal, deciders={}, answers={})


def test_what_changed_since_the_command_was_sent_refuses_it_when_applied():
    """The worker applies a stored command later; the checks shared with validation refuse it then (nothing is
    recorded: these raise before any write)."""
    episode = _episode(pending_index=1)
    user = make_user()
    act = Command(episode=episode, user=user, type="act", payload={"action": CLICK, "thought": ""})
    with pytest.raises(CommandRefused, match="^Take over first: the model is acting.$"):
        COMMANDS["act"].apply(act, _at(episode, 1))
    for kind in ("approve", "edit", "reject"):
        answer = Command(episode=episode, user=user, type=kind, payload={"index": 1, "action": CLICK})
        with pytest.raises(CommandRefused) as refused:
            COMMANDS[kind].apply(answer, _at(episode, 2))
        assert refused.value.message == "The proposal for step 2 is no longer open."
    void = Turn(thought="", action=None, void_reason="no action", raw="gibberish")
    with pytest.raises(CommandRefused) as refused:
        COMMANDS["approve"].apply(Command(episode=episode, user=user, type="approve", payload={"index": 1}),
                                  _at(episode, 1, void))
    assert refused.value.message.startswith("The model's answer could not be read as an action")
    assert not Command.objects.exists()


def test_command_submit_answers_a_refusal_as_an_error_and_stores_nothing():
    episode = _episode()
    user = make_user()
    make_member(episode.project, user)
    result = command_submit(episode_id=episode.pk, user=user, frame={"type": "resume", "id": "r1"})
    assert result.message == {"type": "error", "id": "r1", "data": {"message": "The episode is not paused."}}
    assert not Command.objects.filter(episode=episode).exists()
    result = command_submit(episode_id=episode.pk, user=user, frame={"type": "pause", "id": "p1"})
    assert result.ok and result.message["command"] == "pause"
    assert Command.objects.get(episode=episode, client_id="p1").payload == {}


def test_a_member_removed_while_connected_is_refused_and_nothing_is_stored():
    episode = _episode()
    user = make_user()
    make_member(episode.project, user).delete()
    result = command_submit(episode_id=episode.pk, user=user, frame={"type": "pause", "id": "p1"})
    assert result.message["type"] == "error" and "no longer a member" in result.message["data"]["message"]
    assert not Command.objects.filter(episode=episode).exists()


def test_a_resent_id_is_acknowledged_as_a_duplicate_and_changes_nothing():
    episode = _episode()
    user = make_user()
    make_member(episode.project, user)
    first = command_submit(episode_id=episode.pk, user=user, frame={"type": "pause", "id": "p1"})
    again = command_submit(episode_id=episode.pk, user=user, frame={"type": "takeover", "id": "p1"})
    assert first.message["duplicate"] is False
    assert again.ok and again.duplicate and again.message["command"] == "pause" and again.message["id"] == "p1"
    assert Command.objects.filter(episode=episode).count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_worker_is_woken_once_the_command_is_committed():
    """The NOTIFY goes out in a transaction of its own after the command's commit (annotation/services.py says why):
    by the time the worker wakes, the command is there to read."""
    import psycopg

    from annotation.services import notify_channel
    from annotation.supervision import _conninfo

    episode = _episode()
    user = make_user()
    make_member(episode.project, user)
    with psycopg.connect(_conninfo(), autocommit=True) as worker:
        worker.execute(f'LISTEN "{notify_channel(episode.pk)}"')
        result = command_submit(episode_id=episode.pk, user=user, frame={"type": "pause", "id": "p1"})
        assert result.ok
        woken = next(worker.notifies(timeout=10, stop_after=1))
        stored = worker.execute("SELECT id, status FROM annotation_command WHERE id = %s",
                                [int(woken.payload)]).fetchone()
    assert stored == (Command.objects.get(episode=episode, client_id="p1").pk, "accepted")


def test_the_locked_read_gives_the_members_role_staff_an_admins_and_another_projects_member_none():
    from annotation.services import _episode_locked
    from projects.models import Role

    episode = _episode()
    manager, staff, elsewhere = make_user(), make_user(staff=True), make_user()
    make_member(episode.project, manager, Role.MANAGER)
    make_member(make_project(), elsewhere, Role.ADMIN)
    command_submit(episode_id=episode.pk, user=manager, frame={"type": "pause", "id": "p1"})
    read = _episode_locked(episode_id=episode.pk, user=manager, command_id="p1")
    assert (read.pk, read.member_role, read.existing_command) == (
        episode.pk, Role.MANAGER, Command.objects.get(episode=episode, client_id="p1").pk)
    assert _episode_locked(episode_id=episode.pk, user=manager, command_id="p2").existing_command is None
    assert _episode_locked(episode_id=episode.pk, user=elsewhere, command_id="p1").member_role is None
    # staff act without a membership (an admin's role, as projects.selectors.project_role says); an outsider not
    other = _episode()
    assert command_submit(episode_id=other.pk, user=staff, frame={"type": "pause", "id": "s1"}).ok
    refused = command_submit(episode_id=other.pk, user=elsewhere, frame={"type": "resume", "id": "e1"})
    assert "no longer a member" in refused.message["data"]["message"]
    with pytest.raises(Episode.DoesNotExist):
        _episode_locked(episode_id=episode.pk + 1000, user=manager, command_id="p1")


def test_the_first_command_makes_its_sender_controller_with_two_events_in_order():
    from rollouts.models import Event

    episode = _episode()
    user = make_user()
    make_member(episode.project, user)
    assert command_submit(episode_id=episode.pk, user=user, frame={"type": "pause", "id": "p1"}).ok
    events = list(Event.objects.filter(episode=episode).order_by("seq").values_list("seq", "type", "payload"))
    assert [(seq, kind) for seq, kind, _ in events] == [(1, "episode.state"), (2, "control.changed")]
    assert events[1][2]["control"] == {"username": user.username}
    episode.refresh_from_db()
    assert episode.last_seq == 2 and episode.controller_id == user.pk
