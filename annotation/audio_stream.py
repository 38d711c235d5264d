"""Think-aloud audio as uploaded: checking chunks and decoding a stream to 16 kHz mono PCM.

The browser's MediaRecorder uploads a WebM/Opus (Chrome) or Ogg/Opus (Firefox) stream in ~1-2 s
timeslices. Only chunk 0 carries the container header, so decoding works on chunk 0 followed by
every later chunk in order, never on a later chunk alone (see `check_chunk` for what is checked
of a later chunk on upload). `stream_header` and `resume_point` let a worker decode only the
chunks near the end of a long recording, each at its own time on the clip's clock.

Django-free and Whisper-free: the upload view calls `check_chunk`, the audio worker the decoders
(annotation/speech.py transcribes what they return).
"""

from __future__ import annotations

import io

import av
import av.error
import numpy as np

SAMPLE_RATE = 16_000

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
