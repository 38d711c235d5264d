"""The transcript as the replay reads it: words on the session clock, and where each clip's audio starts on it."""
import pytest
from rest_framework.test import APIClient

from annotation.models import AudioChunk, AudioClip, TranscriptWord
from tests.factories import make_finished_episode

pytestmark = pytest.mark.django_db


def test_transcript_gives_each_clip_the_session_time_its_audio_starts_at(demo):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}, {}], mode="supervised")
    clip = AudioClip.objects.create(episode=episode, user=demo["annotator"], client_id="c1",
                                    content_type="audio/webm", started_at=1000.0)
    AudioChunk.objects.create(clip=clip, index=0, start_time=1000.4, file="audio/x.bin", size=1, sha256="0" * 64)
    step = episode.steps.get(index=1)
    TranscriptWord.objects.create(clip=clip, position=0, word="lower", start=1001.0, end=1001.3, step=step)
    silent = AudioClip.objects.create(episode=episode, user=demo["annotator"], client_id="c2",
                                      content_type="audio/webm", started_at=2000.0)
    client = APIClient()
    client.force_authenticate(demo["manager"])
    body = client.get(f"/api/v1/episodes/{episode.pk}/transcript").json()
    assert body["words"] == [{"word": "lower", "start": 1001.0, "end": 1001.3, "probability": 0.0, "step": 1,
                              "clip": clip.pk, "username": "ann"}]
    origins = {c["id"]: c["origin"] for c in body["clips"]}
    assert origins == {clip.pk: 1000.4, silent.pk: 2000.0}  # no chunk yet: when recording began
