"""Voice steering (issue 40): the grammar (annotation/audio_commands.py) on what Whisper writes, and spoken commands
uploaded as a browser would, transcribed by the real model: a command becomes a stored voice.command event and is
no thought; other speech stays think-aloud; with voice commands off nothing is a command. Spoken personal data is
stored as its label."""
import io
import wave
from pathlib import Path

import numpy as np
import pytest

from annotation import audio
from annotation.audio_commands import VoiceCommand, command_of, commands_in
from rollouts.models import Episode, Event
from tests.annotation.audio_fixtures import encode_webm_opus, missing_tools, split_like_media_recorder, synthesize_wav
from tests.factories import make_member, make_project, make_task, make_user

CONTENT_TYPE = "audio/webm;codecs=opus"


@pytest.mark.parametrize("said, command", [
    ("Approve.", VoiceCommand("approve")),
    (" approved", VoiceCommand("approve")),
    ("Reject, that is the wrong button.", VoiceCommand("reject", reason="that is the wrong button")),
    ("Reject. That is the wrong button.", VoiceCommand("reject", reason="that is the wrong button")),
    ("reject because it clicked cancel", VoiceCommand("reject", reason="it clicked cancel")),
    ("Reject.", VoiceCommand("reject", reason="")),
    ("Take over.", VoiceCommand("takeover")),
    ("Hand back.", VoiceCommand("handback")),
    ("Pause.", VoiceCommand("pause")),
    ("Resume.", VoiceCommand("resume")),
    ("Finish with success.", VoiceCommand("finish", outcome="success")),
    ("Finish, failed.", VoiceCommand("finish", outcome="failure")),
    ("Finish as infeasible.", VoiceCommand("finish", outcome="infeasible")),
])
def test_each_command_of_the_grammar_is_read_as_spoken(said, command):
    assert command_of(said) == command


@pytest.mark.parametrize("said", [
    "Finish.",  # no outcome: unclear, so nothing is done
    "Finish with success or failure.",
    "I would approve this one.",
    "The button I need is at the bottom of the page.",
    "finish the form first",
    "Take over the form and hand back",
    "",
])
def test_speech_that_is_not_a_whole_command_is_none(said):
    assert command_of(said) is None


def test_a_command_is_an_utterance_of_its_own_between_pauses():
    words = [("The", 0.0, 0.2), ("page", 0.2, 0.5), ("loaded.", 0.5, 0.9),  # a thought...
             ("Approve.", 2.0, 2.5),  # ...a pause, the command, a pause...
             ("Now", 4.0, 4.2), ("approve", 4.2, 4.6), ("it", 4.6, 4.7), ("later.", 4.7, 5.0)]  # ...speech again
    assert commands_in(words) == [(VoiceCommand("approve"), [3])]


def _speech(tmp_path: Path, parts: list[str], pause_s: float = 1.6) -> list:
    """espeak-ng speaks each part, with a pause between and after, as 2 s WebM/Opus chunks."""
    pcm, rate = [], 22050
    for i, text in enumerate(parts):
        with wave.open(str(synthesize_wav(text, tmp_path / f"part{i}.wav")), "rb") as handle:
            rate = handle.getframerate()
            pcm.append(np.frombuffer(handle.readframes(handle.getnframes()), dtype=np.int16))
        pcm.append(np.zeros(int(pause_s * rate), dtype=np.int16))
    joined = tmp_path / "joined.wav"
    with wave.open(str(joined), "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(rate)
        out.writeframes(np.concatenate(pcm).tobytes())
    return split_like_media_recorder(encode_webm_opus(joined))


def _transcribed(chunks, *, voice_commands: bool) -> Episode:
    project = make_project()
    user = make_user()
    make_member(project, user)
    episode = Episode.objects.create(project=project, task=make_task(project), seed=1, mode="supervised")
    clip, _ = audio.clip_create(episode=episode, user=user, client_id="voice", content_type=CONTENT_TYPE,
                                started_at=1000.0, voice_commands=voice_commands)
    for chunk in chunks:
        audio.chunk_store(clip=clip, index=chunk.index, data=chunk.data, content_type=CONTENT_TYPE,
                          start_time=1000.0 + chunk.start)
        audio.clip_transcribe(clip_id=clip.pk, final=chunk is chunks[-1])
    return episode


def _words(episode) -> str:
    from annotation.models import TranscriptWord

    return " ".join(TranscriptWord.objects.filter(clip__episode=episode).order_by("start").values_list("word",
                                                                                                        flat=True))


@pytest.mark.django_db
@pytest.mark.skipif(bool(missing_tools()), reason=f"needs {missing_tools()}")
def test_spoken_commands_become_voice_command_events_and_never_thoughts(tmp_path):
    chunks = _speech(tmp_path, ["The page has loaded.", "Approve.", "Reject, that is the wrong button."])
    episode = _transcribed(chunks, voice_commands=True)
    events = list(Event.objects.filter(episode=episode, type="voice.command").order_by("seq"))
    assert [(e.payload["type"], e.payload.get("reason")) for e in events] == [
        ("approve", None), ("reject", "that is the wrong button")], [e.payload for e in events]
    assert events[0].payload["end"] < events[1].payload["start"]  # on the session clock, in order
    said = _words(episode).lower()
    assert "page" in said and "approve" not in said and "reject" not in said and "button" not in said, said


@pytest.mark.django_db
@pytest.mark.skipif(bool(missing_tools()), reason=f"needs {missing_tools()}")
def test_with_voice_commands_off_a_spoken_command_stays_think_aloud(tmp_path):
    # "Take over.": tiny.en, unprompted (voice commands off), reads espeak's "Approve." as "That proved."
    episode = _transcribed(_speech(tmp_path, ["Take over."]), voice_commands=False)
    assert not Event.objects.filter(episode=episode, type="voice.command").exists()
    said = _words(episode).lower()
    assert command_of(said) == VoiceCommand("takeover"), said  # the words of a command, kept as think-aloud


@pytest.mark.django_db
@pytest.mark.skipif(bool(missing_tools()), reason=f"needs {missing_tools()}")
def test_a_spoken_phone_number_is_stored_as_its_label_and_silenced_in_the_audio_reviewers_play(tmp_path):
    from rest_framework.test import APIClient

    from annotation.models import AudioChunk, TranscriptWord

    episode = _transcribed(_speech(tmp_path, ["My number is 415-555-2671."]), voice_commands=False)
    said = _words(episode)
    assert "[PHONE]" in said and "2671" not in said, said

    clip = episode.audio_clips.get()
    client = APIClient()
    client.force_authenticate(clip.user)
    response = client.get(f"/api/v1/audio/{clip.pk}/file")
    assert response.status_code == 200 and response["Content-Type"] == "audio/wav"
    with wave.open(io.BytesIO(response.content)) as handle:
        rate = handle.getframerate()
        played = np.frombuffer(handle.readframes(handle.getnframes()), dtype=np.int16).astype(float)
    origin = AudioChunk.objects.get(clip=clip, index=0).start_time
    words = list(TranscriptWord.objects.filter(clip=clip).order_by("position"))
    redacted = [w for w in words if w.word == "[PHONE]"]
    for word in redacted:  # the number's words are silent...
        assert not played[int((word.start - origin) * rate):int((word.end - origin) * rate)].any()
    first = words[0]  # ...and "My" is still heard
    assert np.abs(played[int((first.start - origin) * rate):int((first.end - origin) * rate)]).max() > 300


@pytest.mark.django_db
def test_a_spoken_rejects_reason_is_stored_redacted_in_its_event():
    from types import SimpleNamespace

    project = make_project()
    user = make_user()
    make_member(project, user)
    episode = Episode.objects.create(project=project, task=make_task(project), seed=1, mode="supervised")
    clip, _ = audio.clip_create(episode=episode, user=user, client_id="voice", content_type=CONTENT_TYPE,
                                started_at=1000.0, voice_commands=True)
    said = "Reject, it should type jane.doe@example.org instead."
    words = [SimpleNamespace(text=w, start=i * 0.3, end=i * 0.3 + 0.25) for i, w in enumerate(said.split())]
    assert audio._commands_sent(clip, words, origin=1000.0) == []  # the whole utterance was the command
    payload = Event.objects.get(episode=episode, type="voice.command").payload
    assert payload["reason"] == "it should type [EMAIL] instead" and "jane" not in payload["words"]
