"""A run trains a checkpoint it starts from (issue 34): with nothing trained deployed, a run on a snapshot is refused
at once saying why, and a run that lost its start (a cycle's, after the deployment was rolled back to the scripted
baseline) fails with the same reason before any trainer starts. Neither trains the untrained tiny model."""
from __future__ import annotations

import pytest

from core.errors import ApplicationError
from snapshots import build
from training import runs
from training.models import RunStatus, TrainingRun
from tests.factories import make_finished_episode

pytestmark = pytest.mark.django_db


def test_a_run_with_nothing_trained_to_start_from_is_refused_and_a_run_that_lost_it_fails_saying_why(demo):
    project = demo["project"]
    make_finished_episode(project, demo["task"], steps=[{}], reward=1.0)
    snapshot = build.snapshot_build(snapshot_id=build.snapshot_create(project=project, kind="sft",
                                                                            build=False).pk)
    with pytest.raises(ApplicationError) as refused:
        runs.run_create(project=project, snapshot=snapshot)
    assert refused.value.status == 409 and refused.value.message == runs.NO_INIT
    assert not TrainingRun.objects.filter(project=project).exists()

    run = runs.recipe_run_create(project=project, init_checkpoint=None, checkpoint_name="c1",
                                     stages=[{"algorithm": "sft", "snapshot": snapshot.pk, "max_steps": 1}])
    assert runs.run_execute(run_id=run.pk) == RunStatus.FAILED
    run.refresh_from_db()
    assert run.error == runs.NO_INIT and "$ python -m trainer" not in run.log and run.checkpoint is None
