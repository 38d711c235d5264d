"""What a supervisor recorded for a step while it was decided (a person's interventions) joins the step in the
transaction that stores it (rollouts.steps.step_record's ``linked``, annotation.supervision's step_stored)."""
import pytest

from agent.actions import Action, Turn
from agent.envs.base import Observation
from agent.rollout import StepRecord
from annotation import services
from annotation.models import Command, Intervention
from rollouts.models import Episode, Step
from rollouts.worker import record_step
from tests.factories import make_project, make_task, make_user

pytestmark = pytest.mark.django_db


def _record(index: int) -> StepRecord:
    action = Action("click", {"x": 3, "y": 4})
    return StepRecord(index=index, observation=Observation("Do it.", "fake://", b"", 10, 10, []), prompt=[],
                      output=None, turn=Turn("mine", action, None, "Thought: mine\nAction: click(x=3, y=4)"),
                      actor="human", proposal=None, reward=0.0, done=False)


@pytest.fixture
def episode():
    project = make_project()
    return Episode.objects.create(project=project, task=make_task(project), seed=0, mode="supervised",
                                  status="running")


def test_the_steps_interventions_are_linked_when_it_is_stored(episode):
    user = make_user()
    command = Command.objects.create(episode=episode, user=user, type="act", client_id="a1", payload={})
    Intervention.objects.create(episode=episode, step_index=2, command=command, kind="act", user=user)
    def link(step):
        services.interventions_link_step(episode_id=episode.pk, step=step)

    step = record_step(episode, _record(2), linked=link)
    assert Intervention.objects.get(command=command).step_id == step.pk


def test_a_link_that_fails_stores_no_step(episode):
    def broken(step):
        raise RuntimeError("the link failed")

    with pytest.raises(RuntimeError):
        record_step(episode, _record(0), linked=broken)
    assert not Step.objects.filter(episode=episode).exists()
    episode.refresh_from_db()
    assert episode.n_steps == 0
