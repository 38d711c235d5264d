"""Think-aloud uploads through the real API, transcribed by a real `audio` worker, aligned to steps."""
import time
from datetime import datetime, timezone as dt_timezone

import numpy as np
import pytest
from rest_framework.test import APIClient

from annotation.models import AudioChunk, AudioClip, TranscriptWord
from annotation.speech import word_error_rate
from rollouts.events import event_append
from rollouts.models import Episode, Event, Step
from tests.annotation.audio_fixtures import (encode_webm_opus, missing_tools, split_inside_blocks, split_like_media_recorder,
                                            synthesize_wav)
from tests.factories import make_member, make_project, make_task, make_user
from tests.layer_listener import GroupListener
from tests.stack import wait_for

pytestmark = pytest.mark.skipif(bool(missing_tools()), reason=f"needs {missing_tools()}")

PHRASE_A = "The button I need is at the bottom of the page."
PHRASE_B = "Now I type the username into the first field."


@pytest.fixture(scope="module")
def speech_chunks(tmp_path_factory):
    path = tmp_path_factory.mktemp("speech")
    chunks = {}
    for name, text in (("a", PHRASE_A), ("b", PHRASE_B)):
        stream = encode_webm_opus(synthesize_wav(text, path / f"{name}.wav"))
        chunks[name] = split_like_media_recorder(stream)
    # Phrase B as a loaded recorder cuts it: chunks start inside blocks, the last holds a block's tail only.
    chunks["b"] = split_inside_blocks(encode_webm_opus(path / "b.wav"), into_block=5)
    return chunks


def setup_episode():
    project = make_project()
    user = make_user()
    make_member(project, user)
    episode = Episode.objects.create(project=project, task=make_task(project), seed=1, mode="supervised")
    client = APIClient()
    client.force_authenticate(user)
    return episode, user, client


def clip_for(client, episode, started_at: float, client_id: str = "clip-1") -> int:
    response = client.post(f"/api/v1/episodes/{episode.pk}/audio/",
                           {"client_id": client_id, "content_type": "audio/webm;codecs=opus", "started_at": started_at},
                           format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()["id"]


def put_chunk(client, clip_id, index, data, start, content_type="audio/webm"):
    return client.generic("PUT", f"/api/v1/audio/{clip_id}/chunks/{index}", data, content_type=content_type,
                          HTTP_X_CHUNK_START=str(start))


@pytest.mark.django_db
def test_bad_chunks_get_their_status_and_lose_nothing(speech_chunks, settings):
    episode, user, client = setup_episode()
    clip_id = clip_for(client, episode, 1000.0)
    first, second = speech_chunks["a"][0], speech_chunks["a"][1]
    wrong_type = put_chunk(client, clip_id, 0, b"hello", 1000.0, content_type="text/plain")
    assert wrong_type.status_code == 415 and wrong_type.json()["detail"]
    early = put_chunk(client, clip_id, 1, second.data, 1002.0)
    assert early.status_code == 409 and "chunk 0 first" in early.json()["detail"]
    garbage = put_chunk(client, clip_id, 0, b"\x1a\x45\xdf\xa3" + b"\x00garbage" * 50, 1000.0)
    assert garbage.status_code == 400 and garbage.json()["detail"]
    settings.LOUPE_AUDIO_MAX_BYTES = 100
    too_big = put_chunk(client, clip_id, 0, first.data, 1000.0)
    assert too_big.status_code == 413
    settings.LOUPE_AUDIO_MAX_BYTES = 2 * 1024 * 1024
    assert not AudioChunk.objects.exists()
    assert put_chunk(client, clip_id, 0, first.data, 1000.0).status_code == 201
    repeat = put_chunk(client, clip_id, 0, first.data, 1000.0)
    assert repeat.status_code == 200 and repeat.json()["duplicate"] is True
    conflict = put_chunk(client, clip_id, 0, second.data, 1000.0)
    assert conflict.status_code == 409
    assert AudioChunk.objects.filter(clip_id=clip_id).count() == 1
    outsider = APIClient()
    outsider.force_authenticate(make_user())
    assert put_chunk(outsider, clip_id, 1, second.data, 1002.0).status_code == 404
    assert outsider.get(f"/api/v1/audio/{clip_id}/file").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_uploaded_speech_is_transcribed_and_lands_on_the_steps_it_was_spoken_in(celery_worker, speech_chunks):
    """Phrase B's chunks are cut inside blocks, as a recorder does on a loaded machine: each is stored (none
    refused as undecodable on its own) and the whole phrase is heard."""
    episode, user, client = setup_episode()
    t0 = 1_800_000_000.0
    running = event_append(episode_id=episode.pk, type="episode.state", payload={"status": "running"})
    step0 = Step.objects.create(episode=episode, index=0, actor="human", action_text="click(x=1, y=2)")
    executed0 = event_append(episode_id=episode.pk, type="step.executed", payload={"index": 0})
    step1 = Step.objects.create(episode=episode, index=1, actor="edited", action_text="click(x=3, y=4)")
    executed1 = event_append(episode_id=episode.pk, type="step.executed", payload={"index": 1})
    for event, at in ((running, t0), (executed0, t0 + 30), (executed1, t0 + 60)):
        Event.objects.filter(pk=event.pk).update(created_at=datetime.fromtimestamp(at, dt_timezone.utc))

    for name, start in (("a", t0 + 5), ("b", t0 + 35)):  # phrase A during step 0, phrase B during step 1
        clip_id = clip_for(client, episode, start, client_id=f"clip-{name}")
        for chunk in speech_chunks[name]:
            assert put_chunk(client, clip_id, chunk.index, chunk.data, start + chunk.start).status_code == 201
        assert client.post(f"/api/v1/audio/{clip_id}/finish").status_code == 202
    wait_for(lambda: AudioClip.objects.filter(episode=episode, finished=True).count() == 2 and all(
        c.transcribed_chunks == c.chunks.count() and c.committed_until > 0 for c in AudioClip.objects.filter(episode=episode)),
        240, interval=0.5, what="both clips transcribed")

    transcript = client.get(f"/api/v1/episodes/{episode.pk}/transcript").json()["words"]
    said_in = {0: [], 1: []}
    for word in transcript:
        said_in[word["step"]].append(word["word"])
    assert word_error_rate(PHRASE_A, " ".join(said_in[0])) <= 0.15, said_in
    assert word_error_rate(PHRASE_B, " ".join(said_in[1])) <= 0.15, said_in
    step0.refresh_from_db()
    step1.refresh_from_db()
    assert word_error_rate(PHRASE_A, step0.human_thought) <= 0.15
    assert word_error_rate(PHRASE_B, step1.human_thought) <= 0.15
    assert Event.objects.filter(episode=episode, type="transcript.words").exists()
    # a repeated chunk adds no words
    before = TranscriptWord.objects.filter(clip__episode=episode).count()
    clip_id = AudioClip.objects.get(episode=episode, client_id="clip-b").pk
    first = speech_chunks["b"][0]
    assert put_chunk(client, clip_id, 0, first.data, t0 + 35).status_code == 409  # finished clip takes no more
    assert TranscriptWord.objects.filter(clip__episode=episode).count() == before


@pytest.mark.django_db
def test_speech_still_going_on_reaches_watchers_as_interim_words_that_are_not_stored(celery_worker, speech_chunks):
    from rollouts.events import episode_group

    episode, user, client = setup_episode()
    listener = GroupListener(episode_group(episode.pk))
    t0 = 1_800_000_000.0
    clip_id = clip_for(client, episode, t0)
    first = speech_chunks["a"][0]  # two seconds into the phrase: nobody has paused yet
    assert put_chunk(client, clip_id, 0, first.data, t0 + first.start).status_code == 201

    deadline = time.monotonic() + 120
    with listener:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no interim words within 120 s")
            message = listener.receive(left)
            if message["type"] == "transcript.interim" and message["words"]:
                break
    said = [w["word"] for w in message["words"]]
    assert message["clip"] == clip_id and message["username"] == user.username
    assert word_error_rate(" ".join(PHRASE_A.split()[:len(said)]), " ".join(said)) <= 0.5, said
    assert all(t0 <= w["start"] <= w["end"] <= t0 + 2.5 for w in message["words"]), message["words"]
    assert not TranscriptWord.objects.filter(clip_id=clip_id).exists()  # provisional: nothing stored
    assert not Event.objects.filter(episode=episode, type__startswith="transcript.interim").exists()

    for chunk in speech_chunks["a"][1:]:
        assert put_chunk(client, clip_id, chunk.index, chunk.data, t0 + chunk.start).status_code == 201
    assert client.post(f"/api/v1/audio/{clip_id}/finish").status_code == 202
    wait_for(lambda: AudioClip.objects.get(pk=clip_id).transcribed_chunks == len(speech_chunks["a"]) and
             TranscriptWord.objects.filter(clip_id=clip_id).exists(), 120, interval=0.5, what="committed words")
    stored = " ".join(TranscriptWord.objects.filter(clip_id=clip_id).order_by("position").values_list("word", flat=True))
    assert word_error_rate(PHRASE_A, stored) <= 0.15, stored


@pytest.mark.django_db
def test_interim_words_are_sent_from_a_worker_thread_that_keeps_an_event_loop(speech_chunks):
    """A worker process that has run a rollout keeps Playwright's event loop running on its thread; the
    interim broadcast must still go out from there (async_to_sync refused to run beside the loop, so after
    the first rollout only final words arrived)."""
    import asyncio

    import numpy as np

    from annotation import audio, audio_stream, speech, whisper_model
    from rollouts.events import episode_group

    episode, user, client = setup_episode()
    clip = AudioClip.objects.select_related("user").get(pk=clip_for(client, episode, 1000.0))
    pcm = audio_stream.decode_pcm(speech_chunks["a"][0].data)
    assert len(pcm) > speech.SAMPLE_RATE and np.abs(pcm).max() > 0.01  # speech, not silence
    (reading,) = speech.transcribe_pending(whisper_model.load_model(), [speech.Pending(pcm, 0.0, False, interim=True)])
    with GroupListener(episode_group(episode.pk)) as listener:
        async def inside_a_running_loop():  # what Playwright's sync API leaves on a rollout worker's thread
            audio._interim_publish(clip, reading.interim, origin=1000.0, committed_until=0.0)

        asyncio.run(inside_a_running_loop())
        message = listener.receive(10)
    assert message["type"] == "transcript.interim" and message["clip"] == clip.pk
    assert message["words"], message


def _cut_ogg(stream: bytes, seconds: float):
    """An Ogg/Opus stream cut as Firefox hands it over: whole pages (about a second each here), the header pages
    with the first one; stamped by their share of the bytes."""
    from tests.annotation.audio_fixtures import Chunk

    pages = [at for at in range(len(stream)) if stream.startswith(b"OggS", at)][2:]  # after Opus's two headers
    cuts = [0, *pages[1:], len(stream)]
    return [Chunk(index=i, start=seconds * start / len(stream), data=stream[start:end])
            for i, (start, end) in enumerate(zip(cuts, cuts[1:]))]


@pytest.mark.django_db
@pytest.mark.parametrize("container", ["webm", "ogg"])
def test_a_long_clip_is_decoded_from_shortly_before_its_mark_with_the_same_words(tmp_path, monkeypatch, container):
    """Continuous recording makes long clips: each increment decodes chunk 0's header and the chunks from about
    DECODE_BEFORE_S before the committed mark (from where a cluster starts, also inside a chunk as Chrome cuts them),
    not the whole clip again, and commits the words a whole decode would. (Resuming inside an Ogg page: test_speech.)"""
    from annotation import audio, audio_stream, speech
    from tests.annotation import audio_fixtures

    text = audio_fixtures.THINK_ALOUD_TEXT  # 21 s, in 1 s chunks cut as Chrome cuts them (inside clusters), or
    wav = synthesize_wav(text, tmp_path / "long.wav")  # as Firefox records it (Ogg), in whole pages
    if container == "webm":
        stream = encode_webm_opus(wav, cluster_ms=1000)
        chunks = audio_fixtures.split_like_chrome(stream, timeslice=1.0)
    else:
        stream = audio_fixtures.encode_ogg_opus(wav)
        chunks = _cut_ogg(stream, len(audio_stream.decode_pcm(stream)) / speech.SAMPLE_RATE)
    content_type = f"audio/{container};codecs=opus"
    decoded: list[int] = []
    real_decode = audio_stream.decode_pcm
    real_from = audio_stream.decode_pcm_from
    monkeypatch.setattr(audio_stream, "decode_pcm", lambda data: decoded.append(len(data)) or real_decode(data))
    monkeypatch.setattr(audio_stream, "decode_pcm_from", lambda data: decoded.append(len(data)) or real_from(data))

    def transcribe(client_id: str) -> list[str]:
        episode, user, _ = setup_episode()
        clip, _ = audio.clip_create(episode=episode, user=user, client_id=client_id, content_type=content_type,
                                    started_at=1000.0)
        for chunk in chunks:
            audio.chunk_store(clip=clip, index=chunk.index, data=chunk.data, content_type=content_type,
                              start_time=1000.0 + chunk.start)
            audio.clip_transcribe(clip_id=clip.pk, final=chunk is chunks[-1])
        return list(clip.words.order_by("position").values_list("word", flat=True))

    tail = transcribe("tail")
    tail_sizes, decoded[:] = list(decoded), []
    monkeypatch.setattr(audio, "DECODE_BEFORE_S", float("inf"))  # every increment decodes the whole clip
    whole = transcribe("whole")
    assert decoded[-1] >= len(stream) - 100  # (the whole clip: chunk 0's bytes and every later chunk's)
    assert max(tail_sizes[-5:]) < len(stream) / 2, tail_sizes  # the last increments decode a few seconds
    assert word_error_rate(text, " ".join(tail)) <= 0.05, tail
    assert word_error_rate(" ".join(whole), " ".join(tail)) <= 0.03, (whole, tail)


@pytest.mark.django_db
def test_chunk_stamps_that_lie_cannot_make_a_tail_decode_skip_audio(tmp_path):
    """The chunks to decode from are picked by the stamps the browser sent: stamps that put every chunk at the clip's
    start would pick the last chunk alone, skipping the audio after the mark. The decoded audio says where it begins,
    and the whole clip is decoded instead."""
    from annotation import audio, audio_stream, speech
    from tests.annotation import audio_fixtures

    stream = encode_webm_opus(synthesize_wav(PHRASE_A + " " + PHRASE_B, tmp_path / "s.wav"), cluster_ms=1000)
    chunks = audio_fixtures.split_like_media_recorder(stream, timeslice=1.0)
    episode, user, _ = setup_episode()
    clips = {}
    for name, stamp in (("honest", lambda chunk: chunk.start), ("lying", lambda chunk: 0.0)):
        clips[name], _ = audio.clip_create(episode=episode, user=user, client_id=name,
                                           content_type="audio/webm;codecs=opus", started_at=1000.0)
        for chunk in chunks:
            audio.chunk_store(clip=clips[name], index=chunk.index, data=chunk.data,
                              content_type="audio/webm;codecs=opus", start_time=1000.0 + stamp(chunk))
    whole, mark = audio_stream.decode_pcm(stream), 4.0
    after = int(mark * speech.SAMPLE_RATE)
    for name, clip in clips.items():
        pcm = audio.pcm_after(list(clip.chunks.order_by("index")), mark)
        assert abs(len(pcm) - len(whole)) < 0.05 * speech.SAMPLE_RATE, name
        # the same sound after the mark (a decode that resumes is not sample-exact: compare 100 ms loudness)
        windows = range(after + 8000, min(len(pcm), len(whole)) - 1600, 1600)
        loudness = [(float(np.sqrt(np.mean(pcm[i:i + 1600] ** 2))), float(np.sqrt(np.mean(whole[i:i + 1600] ** 2))))
                    for i in windows]
        assert all(abs(a - b) <= 0.1 * b + 1e-3 for a, b in loudness), (name, loudness)
    tail = audio._tail_stream(list(clips["honest"].chunks.order_by("index")), mark)
    assert tail is not None and len(tail) < len(stream) * 0.8  # the honest stamps did pick a tail
