"""Rows rendered ahead of a freeze (snapshots/render_ahead.py, issue 38): a finished episode queues its project's
rendering once per delay, the rendering stores what a freeze would render now, and the freeze that follows renders
nothing, with the bytes of a freeze that renders everything; what changed since is rendered again, and only it."""
import logging

import pytest
from django.conf import settings
from django.core.cache import cache

from rollouts.models import Episode, Step
from snapshots import render_ahead, stored_rows
from snapshots.buckets import bucket_episodes
from snapshots.models import RenderedRows
from tests.factories import make_finished_episode, make_project, make_task
from tests.snapshots.test_stored_rows import EDITED, _build, _episodes, _not_rendered, _same

pytestmark = pytest.mark.django_db


def _in_buckets(project, kinds=("sft", "dpo")) -> dict[str, int]:
    return {kind: bucket_episodes(project, kind).count() for kind in kinds}


def test_rows_rendered_ahead_make_the_next_freeze_a_concatenation_of_the_same_bytes(demo, monkeypatch):
    project, task = demo["project"], demo["task"]
    _episodes(project, task, n=9)
    expected = _in_buckets(project)
    assert expected["sft"] >= 5 and expected["dpo"] >= 2  # successes; a person's edits and rejections
    assert render_ahead.render_ahead(project.pk) == expected
    assert RenderedRows.objects.filter(episode__project=project, kind="sft").count() == expected["sft"]
    assert render_ahead.render_ahead(project.pk) == {"sft": 0, "dpo": 0}  # nothing left: nothing rendered twice
    rendered = _build(project, "sft", stored=False)
    _not_rendered(monkeypatch)
    _same(rendered, _build(project, "sft", stored=True))


def test_what_changed_since_is_rendered_again_and_only_it(demo, monkeypatch):
    project, task = demo["project"], demo["task"]
    _episodes(project, task, n=6)
    render_ahead.render_ahead(project.pk)
    episode = bucket_episodes(project, "sft").order_by("pk").first()
    Step.objects.filter(episode=episode, index=0).update(thought="a person's edit after the rendering")
    in_dpo = bucket_episodes(project, "dpo").filter(pk=episode.pk).exists()
    assert render_ahead.render_ahead(project.pk) == {"sft": 1, "dpo": int(in_dpo)}
    rendered = _build(project, "sft", stored=False)
    assert b"a person's edit after the rendering" in rendered[1]
    _not_rendered(monkeypatch)
    _same(rendered, _build(project, "sft", stored=True))


def test_a_time_budget_stops_between_chunks_and_the_next_job_goes_on(demo, monkeypatch):
    project, task = demo["project"], demo["task"]
    _episodes(project, task, n=5)
    monkeypatch.setattr(render_ahead, "CHUNK", 2)
    assert render_ahead.render_ahead(project.pk, seconds=0) == {"sft": 0, "dpo": 0}
    monkeypatch.setattr(settings, "LOUPE_RENDER_AHEAD_KINDS", "sft")
    expected = _in_buckets(project, ["sft"])
    assert expected["sft"] >= 3 and render_ahead.render_ahead(project.pk) == expected  # chunks of 2


def test_a_project_whose_checkpoint_cannot_be_rendered_for_renders_nothing_and_says_why(demo, monkeypatch, caplog):
    project, task = demo["project"], demo["task"]
    _episodes(project, task, n=2)

    def broken(project):
        from core.errors import ApplicationError
        raise ApplicationError("Checkpoint v3 cannot have rows rendered for it: no prompt style.")

    monkeypatch.setattr(render_ahead, "export_target", broken)
    with caplog.at_level(logging.INFO, logger="loupe.snapshots"):
        assert render_ahead.render_ahead(project.pk) == {}
    assert "cannot have rows rendered" in caplog.text and not RenderedRows.objects.exists()


def test_finished_episodes_queue_one_rendering_per_project_after_the_delay(demo, monkeypatch,
                                                                          django_capture_on_commit_callbacks):
    project, task = demo["project"], demo["task"]
    other = make_project("Gamma")
    queued = []
    monkeypatch.setattr(render_ahead, "job", lambda name: type("Task", (), {
        "apply_async": staticmethod(lambda args, countdown: queued.append((name, args, countdown)))}))
    for pk in (project.pk, other.pk):
        cache.delete(f"render-ahead:{pk}")
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):
            make_finished_episode(project, task, steps=[{}])
        make_finished_episode(other, make_task(other), steps=[{}])
    delay = settings.LOUPE_RENDER_AHEAD_DELAY
    assert queued == [("snapshots.tasks.render_ahead", (project.pk,), delay),
                      ("snapshots.tasks.render_ahead", (other.pk,), delay)]
    assert settings.CELERY_BEAT_SCHEDULE["rows-render-ahead"]["task"] == "snapshots.tasks.render_ahead_sweep"


def test_with_redis_away_an_episode_still_finishes_and_the_sweep_renders_it(demo, monkeypatch, caplog,
                                                                          django_capture_on_commit_callbacks):
    project, task = demo["project"], demo["task"]

    def down(*args, **kwargs):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(render_ahead.cache, "add", down)
    with caplog.at_level(logging.WARNING, logger="loupe.snapshots"), \
            django_capture_on_commit_callbacks(execute=True):
        episode = make_finished_episode(project, task, steps=[{}, {}])
    assert episode.status == "finished" and "the sweep will" in caplog.text
    gamma = make_project("Gamma")
    make_finished_episode(gamma, make_task(gamma), steps=[{}])
    swept = render_ahead.render_ahead_sweep()
    assert swept[project.pk] == swept[gamma.pk] == {"sft": 1, "dpo": 0}  # a success with no correction
    assert demo["other"].pk not in swept  # no finished episode: not visited
    assert RenderedRows.objects.filter(episode=episode, kind="sft").exists()


def test_an_episode_that_cannot_be_rendered_is_left_to_the_freeze_and_the_others_are_stored(demo, monkeypatch,
                                                                                           caplog):
    project, task = demo["project"], demo["task"]
    _episodes(project, task, n=6)
    monkeypatch.setattr(settings, "LOUPE_RENDER_AHEAD_KINDS", "sft")
    sft = list(bucket_episodes(project, "sft").order_by("pk").values_list("pk", flat=True))
    bad, real = sft[1], stored_rows.rows_iter

    def rows_iter(kind, episode_ids, **kwargs):
        for episode, rows in real(kind, episode_ids, **kwargs):
            if episode.pk == bad:
                raise ValueError("a step's action is not an action: {'name': 7}")
            yield episode, rows

    monkeypatch.setattr(stored_rows, "rows_iter", rows_iter)
    with caplog.at_level(logging.WARNING, logger="loupe.snapshots"):
        assert render_ahead.render_ahead(project.pk) == {"sft": len(sft) - 1}
    assert f"episode {bad} (sft rows) cannot be rendered" in caplog.text
    assert set(RenderedRows.objects.values_list("episode_id", flat=True)) == set(sft) - {bad}


def test_a_dpo_branch_is_not_rendered_ahead_its_rows_are_its_pair_with_its_parent(demo, monkeypatch):
    project, task = demo["project"], demo["task"]
    parent = make_finished_episode(project, task, steps=[EDITED])
    branch = make_finished_episode(project, task, steps=[EDITED])
    Episode.objects.filter(pk=branch.pk).update(parent=parent)
    monkeypatch.setattr(settings, "LOUPE_RENDER_AHEAD_KINDS", "dpo")
    assert bucket_episodes(project, "dpo").filter(pk=branch.pk).exists()
    assert render_ahead.render_ahead(project.pk) == {"dpo": 1}  # the parent: the branch is rendered by each freeze
    assert render_ahead.render_ahead(project.pk) == {"dpo": 0}
