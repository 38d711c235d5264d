"""A deployed checkpoint's pixel limits reach its episodes (issue 36): the rollout worker reads the served dir's
preprocessor_config.json (agent.formats.pixel_limits) into run_episode's ``pixels``, so a UI-TARS answer is read on
the grid that checkpoint's processor showed it, not the ui-tars package's."""
from __future__ import annotations

import json

import pytest

from agent import formats
from agent.actions import Action
from training import deployments
from rollouts.models import Episode
from rollouts.worker import prompting_for
from tests.factories import make_project, make_task
from tests.rollouts.test_action_formats import checkpoint_dir

pytestmark = pytest.mark.django_db


def test_the_worker_reads_the_served_checkpoints_pixel_limits(tmp_path):
    project = make_project()
    uri = checkpoint_dir(tmp_path / "ui-tars", vision=True)
    (tmp_path / "ui-tars" / "preprocessor_config.json").write_text(json.dumps(
        {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14}))
    checkpoint = deployments.checkpoint_register(project=project, name="ui-tars", uri=uri, action_format="uitars")
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="openai", served_name="ui-tars")
    episode = Episode.objects.create(project=project, task=make_task(project), seed=1, checkpoint=checkpoint)
    prompting = prompting_for(episode)
    assert prompting["pixels"] == {"min_pixels": 3136, "max_pixels": 12845056}
    answer = "Thought: OK.\nAction: click(start_box='<|box_start|>(84,112)<|box_end|>')"
    turn = formats.parse(answer, format="uitars", width=160, height=210, **prompting["pixels"])
    assert turn.action == Action("click", {"x": 80, "y": 105})


def test_rows_are_written_on_the_grid_the_deployed_checkpoints_processor_shows(tmp_path):
    """Training rows teach the grid the rollout reads: a person's click at the screen's (80, 105) is written as the
    UI-TARS point (84, 112) for a checkpoint whose processor has Qwen's minimum, recorded in the row's rendered_for."""
    from agent.rows import RenderedFor, render_turn
    from snapshots.buckets import export_target

    project = make_project()
    folder = tmp_path / "ui-tars"
    uri = checkpoint_dir(folder, vision=True)
    (folder / "preprocessor_config.json").write_text(json.dumps({"min_pixels": 3136, "max_pixels": 12845056}))
    checkpoint = deployments.checkpoint_register(project=project, name="ui-tars", uri=uri, action_format="uitars")
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="openai", served_name="ui-tars")
    target = export_target(project)
    assert (target.min_pixels, target.max_pixels) == (3136, 12845056)
    assert target.to_dict()["min_pixels"] == 3136 and RenderedFor.from_dict(target.to_dict(), "row") == target
    text = render_turn("OK.", Action("click", {"x": 80, "y": 105}), target, 160, 210)
    assert "(84,112)" in text
    assert formats.parse(text, format="uitars", width=160, height=210, **target.pixels).action == \
        Action("click", {"x": 80, "y": 105})
    legacy = RenderedFor.from_dict({"style": "full", "action_format": "uitars", "reads_images": True,
                                    "history_images": 0}, "row")  # rows written before: the format's defaults
    assert "min_pixels" not in legacy.to_dict() and "(126,168)" in render_turn("OK.", Action(
        "click", {"x": 80, "y": 105}), legacy, 160, 210)
    with pytest.raises(ValueError, match="min_pixels must be a positive whole number"):
        RenderedFor.from_dict({"action_format": "uitars", "min_pixels": -1}, "row")
