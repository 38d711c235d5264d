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


def test_clip_audio_answers_byte_ranges_so_the_replay_can_seek(demo):
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}], mode="supervised")
    clip = AudioClip.objects.create(episode=episode, user=demo["annotator"], client_id="c1",
                                    content_type="audio/webm;codecs=opus", started_at=1000.0)
    for index, data in enumerate([b"0123456789", b"abcdef"]):
        name = default_storage.save(f"audio/range-test-{index}.bin", ContentFile(data))
        AudioChunk.objects.create(clip=clip, index=index, start_time=1000.0, file=name, size=len(data), sha256="0" * 64)
    client = APIClient()
    client.force_authenticate(demo["manager"])
    url = f"/api/v1/audio/{clip.pk}/file"
    whole = client.get(url)
    assert whole.status_code == 200 and whole.content == b"0123456789abcdef" and whole["Accept-Ranges"] == "bytes"
    assert whole["Content-Type"] == "audio/webm"
    part = client.get(url, HTTP_RANGE="bytes=8-11")
    assert part.status_code == 206 and part.content == b"89ab" and part["Content-Range"] == "bytes 8-11/16"
    assert client.get(url, HTTP_RANGE="bytes=10-").content == b"abcdef"
    assert client.get(url, HTTP_RANGE="bytes=-3").content == b"def"
    assert client.get(url, HTTP_RANGE="bytes=12-99").content == b"cdef"  # clipped to the end
    outside = client.get(url, HTTP_RANGE="bytes=16-20")
    assert outside.status_code == 416 and outside["Content-Range"] == "bytes */16"
    assert client.get(url, HTTP_RANGE="bytes=0-1,4-5").status_code == 200  # several ranges: the whole body
    stranger = APIClient()
    stranger.force_authenticate(demo["outsider"])
    assert stranger.get(url, HTTP_RANGE="bytes=0-3").status_code == 404
