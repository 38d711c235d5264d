"""kill -9 of Loupe's own processes while people work: daphne with annotators connected, the audio worker in
the middle of a transcription. (The rollout worker's: tests/rollouts/test_rollout_faults.py.) Each test ends
by checking that what was acknowledged is stored exactly once."""
from __future__ import annotations

import os
import signal
import time

import pytest

from rollouts import episodes
from rollouts.models import Episode, Step
from tests.reliability.live import (Watcher, assert_acked_commands_stored_once, assert_saw_the_whole_log,
                                    scripted_project, start_daphne_on, wait_episodes_end)
from tests.stack import ProcessStack, free_port, stack_env, start_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.mark.browser
def test_daphne_killed_with_annotators_connected_they_reconnect_and_carry_on(tmp_path):
    project, task, users, tokens = scripted_project("login-user", max_steps=8)
    stack = ProcessStack([], [])
    watchers: list[Watcher] = []
    try:
        port = free_port()
        base = start_daphne_on(stack, tmp_path, stack_env(), port, name="daphne-1")
        start_worker(stack, tmp_path, stack_env(), queues="live,rollouts", name="rollouts-kill")
        episode_id = episodes.episodes_start(project=project, task=task, seeds=[7], mode="supervised",
                                             actor=users[0])[0].pk
        steer = Watcher(base, episode_id, tokens[0], approve=True, name="steer")
        watchers += [steer, Watcher(base, episode_id, tokens[1], name="watch")]
        wait_for(lambda: Step.objects.filter(episode_id=episode_id).count() >= 2, 180, what="two steps")
        victim = stack.processes[0]
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(10)
        steps_while_down = Step.objects.filter(episode_id=episode_id).count()
        time.sleep(2)
        start_daphne_on(stack, tmp_path, stack_env(), port, name="daphne-2")  # the supervisor restarts it
        wait_episodes_end([episode_id], 300)
        episode = Episode.objects.get(pk=episode_id)
        assert episode.status == "finished", (episode.status, episode.end_reason)
        assert episode.n_steps > steps_while_down
        for watcher in watchers:
            assert watcher.connects >= 2, f"{watcher.name} never reconnected"
            assert_saw_the_whole_log(watcher)
        assert assert_acked_commands_stored_once(watchers) == episode.n_steps  # one approval a step, once each
    finally:
        for watcher in watchers:
            watcher.close()
        stack.stop()


def _transcribing(clip_id: int) -> bool:
    """Whether a transcription job holds the clip now (it locks the clip's row for the whole job)."""
    from django.db import DatabaseError, transaction

    from annotation.models import AudioClip

    try:
        with transaction.atomic():
            AudioClip.objects.select_for_update(nowait=True).get(pk=clip_id)
        return False
    except DatabaseError:
        return True


def test_audio_worker_killed_mid_transcription_the_sweep_finishes_the_transcript(tmp_path, settings):
    from rest_framework.test import APIClient

    from annotation.models import AudioChunk, AudioClip, TranscriptWord
    from annotation.speech import word_error_rate
    from annotation.tasks import clips_sweep_stalled
    from tests.annotation.audio_fixtures import (THINK_ALOUD_TEXT, encode_webm_opus, missing_tools,
                                                 split_like_media_recorder, synthesize_wav)
    from tests.factories import make_member, make_project, make_task, make_user
    from webapp.celery import app

    if missing_tools():
        pytest.skip(f"needs {missing_tools()}")
    chunks = split_like_media_recorder(encode_webm_opus(synthesize_wav(THINK_ALOUD_TEXT, tmp_path / "speech.wav")))
    project, user = make_project(), make_user()
    make_member(project, user)
    episode = Episode.objects.create(project=project, task=make_task(project), seed=1, mode="supervised")
    client = APIClient()
    client.force_authenticate(user)
    t0 = 1_800_000_000.0
    clip_id = client.post(f"/api/v1/episodes/{episode.pk}/audio/", {"client_id": "think", "content_type": "audio/webm",
                                                                    "started_at": t0}, format="json").json()["id"]
    for chunk in chunks:  # every chunk acknowledged (201) before any worker runs: a job a chunk, and the final one
        response = client.generic("PUT", f"/api/v1/audio/{clip_id}/chunks/{chunk.index}", chunk.data,
                                  content_type="audio/webm", HTTP_X_CHUNK_START=str(t0 + chunk.start))
        assert response.status_code == 201, response.content
    assert client.post(f"/api/v1/audio/{clip_id}/finish").status_code == 202
    stack = ProcessStack([], [])
    try:
        victim = start_worker(stack, tmp_path, stack_env(), queues="audio", name="audio-victim")
        wait_for(lambda: _transcribing(clip_id), 120, interval=0.1, what="the transcription to start")
        time.sleep(1.0)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(10)
        clip = AudioClip.objects.get(pk=clip_id)
        assert clip.transcribed_chunks == 0 and not TranscriptWord.objects.filter(clip=clip).exists(), \
            "the killed job committed part of its work"
        # The killed job is unacknowledged: the broker gives it back only after its visibility timeout (an hour).
        # Drop the jobs still queued too, so that only the sweep can finish the clip.
        app.control.purge()
        start_worker(stack, tmp_path, stack_env(), queues="audio", name="audio-rescuer")
        settings.LOUPE_AUDIO_STALLED_SECONDS = 0.5
        assert clips_sweep_stalled.apply().get() == [clip_id]
        wait_for(lambda: AudioClip.objects.get(pk=clip_id).transcribed_chunks == len(chunks), 240, interval=0.5,
                 what="the rescued transcription")
    finally:
        stack.stop()
    clip = AudioClip.objects.get(pk=clip_id)
    assert AudioChunk.objects.filter(clip=clip).count() == len(chunks)  # every acknowledged chunk, once
    words = list(TranscriptWord.objects.filter(clip=clip).order_by("position"))
    assert [w.position for w in words] == list(range(len(words)))
    assert word_error_rate(THINK_ALOUD_TEXT, " ".join(w.word for w in words)) <= 0.15
    assert clips_sweep_stalled.apply().get() == []  # nothing left to do


def test_train_worker_killed_mid_run_the_run_is_rerun_or_failed_never_stuck_running(tmp_path):
    from django.utils import timezone

    from snapshots import build
    from training import runs
    from training.models import TrainingRun
    from tests.factories import make_finished_episode, make_member, make_project, make_task, make_user

    project, manager = make_project(), make_user()
    make_member(project, manager, "manager")
    task = make_task(project, "click-test")
    for seed in range(3):
        make_finished_episode(project, task, steps=[{}, {}], reward=1.0)
    snapshot = build.snapshot_build(snapshot_id=build.snapshot_create(project=project, kind="sft",
                                                                             actor=manager).pk)
    stack = ProcessStack([], [])
    try:
        victim = start_worker(stack, tmp_path, stack_env(), queues="train", name="train-victim")
        from training import deployments
        from trainer.model import save_tiny_untrained

        untrained = deployments.checkpoint_register(project=project, name="untrained",
                                                    uri=str(save_tiny_untrained(tmp_path / "untrained")))
        run = runs.run_create(project=project, snapshot=snapshot, max_steps=100_000, actor=manager,
                                  init_checkpoint=untrained)
        wait_for(lambda: TrainingRun.objects.get(pk=run.pk).progress > 0, 300, interval=0.5, what="training")
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(10)
        killed_at = timezone.now()
        start_worker(stack, tmp_path, stack_env(), queues="train", name="train-rescuer")

        def settled():
            runs.runs_restart_stalled(older_than_seconds=5)  # the beat sweep, with the tests' short heartbeat
            run_now = TrainingRun.objects.get(pk=run.pk)
            return run_now.status == "failed" and run_now.error or run_now.started_at > killed_at

        wait_for(settled, 120, interval=1, what="the killed run to be re-run or failed")
        rerun = TrainingRun.objects.get(pk=run.pk)
        assert rerun.status == "running" and "its train worker stopped; the run starts over" in rerun.log
        wait_for(lambda: TrainingRun.objects.get(pk=run.pk).progress > 0, 300, interval=0.5, what="training again")
    finally:
        stack.stop()
