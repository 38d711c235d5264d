"""A cycle's evaluation of a screen-reading checkpoint prompts it as its deployment would be: in its record's action
format, with its screenshot and the cycle's history_images earlier ones (cycles/evaluation.py)."""
from __future__ import annotations

import json

import pytest

from training import deployments
from cycles import evaluation
from cycles.models import Cycle, Evaluation
from tests.factories import make_project
from trainer.tiny_vlm import save_tiny_vlm


@pytest.mark.django_db
def test_a_reading_checkpoint_is_evaluated_in_its_format_with_the_cycles_history_images(tmp_path):
    project = make_project()
    path = save_tiny_vlm(tmp_path / "vlm")  # no loupe.json: the record's format is the one that counts
    checkpoint = deployments.checkpoint_register(project=project, name="vlm", uri=str(path), action_format="uitars")
    assert checkpoint.reads_images
    cycle = Cycle.objects.create(project=project, iteration=1, config={"history_images": 1})
    plan = [{"env": "miniwob", "seeds": "100000-100000", "max_steps": 2, "tasks": ["click-test"]}]

    evaluation.evaluate_checkpoint(cycle, checkpoint, "candidate", plan, (0, 1), tmp_path / "cycle")

    stored = Evaluation.objects.get(cycle=cycle, checkpoint=checkpoint)
    assert stored.episodes == 1 and stored.success_rate == 0.0  # untrained
    out = tmp_path / "cycle" / f"eval-candidate-{checkpoint.pk}-0"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["prompting"] == {"action_format": "uitars", "with_image": True, "history_images": 1,
                                    "pixels": {"min_pixels": 3136, "max_pixels": 200704}}  # its processor's grid
    episode = json.loads((out / "episodes.jsonl").read_text())
    assert episode["prompt_images"] == [min(i, 1) + 1 for i in range(episode["steps"])]
