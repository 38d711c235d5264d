"""The think-aloud batch's query for clips still recording: right rows, and found through the partial index on
unfinished clips rather than a scan of every clip a project ever recorded."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from annotation.audio import waiting_clips
from annotation.models import AudioChunk, AudioClip
from tests.factories import make_finished_episode, make_project, make_task, make_user

pytestmark = pytest.mark.django_db


def _clip(episode, user, n: int, *, finished: bool, chunks: int, transcribed: int) -> AudioClip:
    clip = AudioClip.objects.create(episode=episode, user=user, client_id=f"c{n}", content_type="audio/webm",
                                    started_at=0.0, finished=finished, transcribed_chunks=transcribed)
    AudioChunk.objects.bulk_create(AudioChunk(clip=clip, index=i, start_time=float(i), file=f"f{n}-{i}", size=1,
                                              sha256="0" * 64) for i in range(chunks))
    return clip


def test_waiting_clips_are_the_unfinished_ones_with_new_audio_and_use_the_partial_index():
    project = make_project()
    episode = make_finished_episode(project, make_task(project), steps=[{}])
    user = make_user()
    asking = _clip(episode, user, 0, finished=False, chunks=2, transcribed=1)
    waiting = _clip(episode, user, 1, finished=False, chunks=3, transcribed=1)
    _clip(episode, user, 2, finished=False, chunks=2, transcribed=2)  # nothing new
    _clip(episode, user, 3, finished=True, chunks=2, transcribed=1)  # finished: its own final job reads it
    AudioClip.objects.bulk_create(AudioClip(episode=episode, user=user, client_id=f"old{n}", content_type="audio/webm",
                                            started_at=0.0, finished=True) for n in range(20_000))
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {AudioClip._meta.db_table}")
    with transaction.atomic():
        assert [clip.pk for clip in waiting_clips(exclude=asking.pk)] == [waiting.pk]
        plan = waiting_clips(exclude=asking.pk).explain()
    assert "audioclip_unfinished" in plan, plan
