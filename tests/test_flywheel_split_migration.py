"""A database made before the flywheel app was split upgrades with its rows: built at the last migration of the one
flywheel app (the lifecycle apps' migrations not applied), filled through that state's models, migrated to the
latest, and read back through the lifecycle apps' models (projects, rollouts, snapshots, training, cycles)."""
import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("flywheel", "0023_action_format_names"), ("annotation", "0005_redactionmark"),
          ("projects", None), ("rollouts", None), ("snapshots", None), ("training", None), ("cycles", None)]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def _latest():
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


def _migrate_back_to_latest(latest) -> None:
    """The test database as every other test finds it (an assertion that failed left it upgraded already)."""
    executor = MigrationExecutor(connection)
    if executor.migration_plan(latest):
        executor.migrate(latest)


@pytest.mark.django_db(transaction=True)
def test_a_database_of_the_one_flywheel_app_upgrades_with_its_rows():
    latest = _latest()
    try:
        executor = _migrate(BEFORE)
        old = executor.loader.project_state(BEFORE[:2]).apps
        User = old.get_model("auth", "User")
        user = User.objects.create(username="before-the-split")
        project = old.get_model("flywheel", "Project").objects.create(name="kept")
        old.get_model("flywheel", "Membership").objects.create(project=project, user=user, role="admin")
        task = old.get_model("flywheel", "TaskSpec").objects.create(project=project, env_kind="miniwob",
                                                                   task_name="click-button", split="train")
        checkpoint = old.get_model("flywheel", "Checkpoint").objects.create(project=project, name="v0", uri="/v0")
        episode = old.get_model("flywheel", "Episode").objects.create(project=project, task=task, seed=3,
                                                                     checkpoint=checkpoint, mode="supervised",
                                                                     status="finished")
        step = old.get_model("flywheel", "Step").objects.create(episode=episode, index=0, actor="human",
                                                               action={"name": "click", "args": {"x": 1, "y": 2}})
        snapshot = old.get_model("flywheel", "DatasetSnapshot").objects.create(project=project, name="s",
                                                                              kind="sft", status="ready")
        old.get_model("flywheel", "SnapshotEpisode").objects.create(snapshot=snapshot, episode=episode, rows=1)
        run = old.get_model("flywheel", "TrainingRun").objects.create(project=project, snapshot=snapshot,
                                                                      init_checkpoint=checkpoint)
        cycle = old.get_model("flywheel", "Cycle").objects.create(project=project, iteration=1, run=run,
                                                                  baseline=checkpoint)
        cycle.snapshots.add(snapshot)
        old.get_model("flywheel", "CorrectionReplay").objects.create(cycle=cycle, step=step, kind="edit",
                                                                     learned=True)
        old_type = ContentType.objects.get_or_create(app_label="flywheel", model="episode")[0]

        _migrate(latest)

        from cycles.models import Cycle
        from projects.models import Membership, Project
        from rollouts.models import CorrectionReplay, Episode, Step
        from snapshots.models import DatasetSnapshot
        from training.models import TrainingRun

        kept = Project.objects.get(pk=project.pk)
        assert kept.name == "kept"
        assert Membership.objects.get(project=kept).user.username == "before-the-split"
        e = Episode.objects.select_related("task", "checkpoint").get(pk=episode.pk)
        assert (e.task.task_name, e.seed, e.checkpoint.name) == ("click-button", 3, "v0")
        assert Step.objects.get(episode=e).action == {"name": "click", "args": {"x": 1, "y": 2}}
        s = DatasetSnapshot.objects.get(pk=snapshot.pk)
        assert list(s.members.values_list("episode_id", flat=True)) == [episode.pk]
        assert TrainingRun.objects.get(pk=run.pk).snapshot_id == snapshot.pk
        c = Cycle.objects.get(pk=cycle.pk)
        assert (c.run_id, c.baseline_id, list(c.snapshots.values_list("pk", flat=True))) == (run.pk, checkpoint.pk,
                                                                                           [snapshot.pk])
        assert CorrectionReplay.objects.get(cycle=c).step_id == step.pk
        # the content type followed the model: permissions and admin log entries still name it
        assert ContentType.objects.get(pk=old_type.pk).app_label == "rollouts"
    finally:
        _migrate_back_to_latest(latest)
