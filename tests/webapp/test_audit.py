"""The audit log (webapp/audit.py): interventions, reviews, snapshots, deployments and rollbacks each leave
who, what (action and 'kind:id' target, with the project), and when."""
import pytest

from annotation import commands, reviews, services as annotation_services
from annotation.models import Command
from training import deployments
from snapshots import build
from rollouts.models import Checkpoint
from tests.factories import make_finished_episode
from core.models import AuditEntry

pytestmark = pytest.mark.django_db


def entry(action: str) -> AuditEntry:
    [found] = AuditEntry.objects.filter(action=action)
    assert found.at is not None
    return found


def test_each_kind_of_change_is_logged_with_who_what_and_where(demo):
    project, manager, annotator = demo["project"], demo["manager"], demo["annotator"]
    episode = make_finished_episode(project, demo["task"], steps=[{}], mode="supervised")

    reviews.review_submit(episode=episode, reviewer=manager, verdict="accept", grade=4, step_labels={}, comment="")
    review = entry("review.create")
    assert (review.actor, review.target, review.project_id) == (manager, f"episode:{episode.pk}", project.pk)

    snapshot = build.snapshot_create(project=project, kind="sft", actor=manager)
    logged = entry("snapshot.create")
    assert (logged.actor, logged.target, logged.project_id) == (manager, f"snapshot:{snapshot.pk}", project.pk)

    first = Checkpoint.objects.create(project=project, name="a", uri="scripted:")
    second = Checkpoint.objects.create(project=project, name="b", uri="scripted:")
    old = deployments.deployment_promote(project=project, checkpoint=first, actor=manager, backend="scripted")
    deployments.deployment_promote(project=project, checkpoint=second, actor=manager, backend="scripted")
    old.refresh_from_db()
    deployments.deployment_rollback(project=project, deployment=old, actor=manager)
    rollback = entry("deployment.rollback")
    assert (rollback.actor, rollback.target, rollback.project_id) == (manager, f"deployment:{old.pk}", project.pk)
    assert AuditEntry.objects.filter(action="deployment.promote", project_id=project.pk).count() == 3

    live = make_finished_episode(project, demo["task"], steps=[{}], mode="supervised")
    live.status = "running"
    live.save(update_fields=["status"])
    assert annotation_services.command_submit(episode_id=live.pk, user=annotator,
                                              frame={"type": "pause", "id": "p1"}).ok
    commands.command_apply(command=Command.objects.get(client_id="p1"))
    intervention = entry("intervention.pause")
    assert (intervention.actor, intervention.target, intervention.project_id) == (
        annotator, f"episode:{live.pk}", project.pk)
    assert intervention.data["command"] == "p1"
