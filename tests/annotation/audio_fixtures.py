"""Known speech as a browser would upload it, for the audio tests and the audio benchmark.

espeak-ng speaks a known text to WAV, ffmpeg encodes it to WebM/Opus with ~2 s clusters, and
`split_like_media_recorder` cuts the byte stream the way MediaRecorder's timeslice does: chunk 0
carries the EBML header, Tracks and the first cluster; every later chunk is continuation bytes
(whole clusters) that only decode after chunk 0. Nothing here is downloaded; the tools are the
Debian packages espeak-ng and ffmpeg.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from annotation.audio_stream import decode_pcm
from annotation.speech import CONTEXT_WORDS, Word, transcribe_increment

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

# Three plain sentences, about 20 s at the speaking rate below: the kind of remark an annotator
# makes while watching the agent.
THINK_ALOUD_TEXT = (
    "The agent opened the settings page, but it clicked the wrong button at the top. "
    "I think it should scroll down to the bottom first and then press the green save button. "
    "Now the form looks correct, so I will hand control back and let it continue with the next task."
)

SPEAKING_RATE_WPM = 140
CLUSTER_MS = 2000

_EBML_HEADER_ID = 0x1A45DFA3
_SEGMENT_ID = 0x18538067
_CLUSTER_ID = 0x1F43B675
_CLUSTER_TIMECODE_ID = 0xE7
_SIMPLE_BLOCK_ID = 0xA3
# Children of a Cluster we may meet while walking a cluster of unknown size (live muxers).
_CLUSTER_CHILD_IDS = frozenset({0xE7, 0xA3, 0xA0, 0xA7, 0xAB, 0x5854})


def missing_tools() -> list[str]:
    """Names of the command-line tools these fixtures need that are not on PATH."""
    return [tool for tool in ("espeak-ng", "ffmpeg") if shutil.which(tool) is None]


def synthesize_wav(text: str, path: Path, *, rate_wpm: int = SPEAKING_RATE_WPM) -> Path:
    """Speak `text` with espeak-ng into a WAV file (22.05 kHz mono) and return its path."""
    subprocess.run(
        ["espeak-ng", "-v", "en-us", "-s", str(rate_wpm), "-g", "1", "-w", str(path), text],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return path


def encode_with_ffmpeg(wav_path: Path, *output_args: str) -> bytes:
    """Run ffmpeg on a WAV file with the given output options and return what it writes."""
    result = subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-i", str(wav_path),
         *output_args, "pipe:1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return result.stdout


def encode_webm_opus(wav_path: Path, *, cluster_ms: int = CLUSTER_MS) -> bytes:
    """Encode a WAV file to a live-style WebM/Opus stream with clusters of about `cluster_ms`.

    48 kHz mono Opus at 32 kbit/s is what Chrome's MediaRecorder produces for a microphone;
    `-live 1` writes an unknown-size Segment and no Cues, as a recorder that cannot seek does.
    """
    return encode_with_ffmpeg(wav_path, "-c:a", "libopus", "-b:a", "32k", "-ar", "48000", "-ac", "1",
                              "-f", "webm", "-live", "1", "-cluster_time_limit", str(cluster_ms))


def encode_ogg_opus(wav_path: Path) -> bytes:
    """Encode a WAV file to an Ogg/Opus stream, as Firefox's MediaRecorder writes."""
    return encode_with_ffmpeg(wav_path, "-c:a", "libopus", "-b:a", "32k", "-ar", "48000", "-ac", "1",
                              "-f", "ogg")


def encode_wav_16k(wav_path: Path) -> bytes:
    """Re-encode a WAV file to 16 kHz mono PCM WAV bytes (a whole-file upload)."""
    return encode_with_ffmpeg(wav_path, "-ar", "16000", "-ac", "1", "-f", "wav")


@dataclass(frozen=True)
class Chunk:
    """One timeslice upload: its index, its start on the clip's clock, and its bytes."""

    index: int
    start: float
    data: bytes


def split_like_media_recorder(stream: bytes, *, timeslice: float = 2.0) -> list[Chunk]:
    """Cut a WebM stream into MediaRecorder-like chunks of about `timeslice` seconds.

    Chunk 0 is everything before the second group of clusters (header, Tracks, first cluster);
    each later chunk is a run of whole clusters whose first timecode starts a new timeslice.
    """
    clusters = _cluster_offsets(stream)
    if not clusters:
        raise ValueError("no Cluster element found; is this a WebM stream?")
    return _group_by_timeslice(stream, clusters[1:], timeslice)


def split_like_chrome(stream: bytes, *, timeslice: float = 2.0) -> list[Chunk]:
    """Cut a WebM stream as Chrome's MediaRecorder does when clusters outlast the timeslice.

    Chrome's live muxer writes Clusters of unknown size and hands over the whole blocks it has
    at each timeslice, so a later chunk may begin in the middle of a cluster. The stream's
    cluster sizes are rewritten as "unknown" (same width) and the cuts fall between SimpleBlocks.
    """
    live = bytearray(stream)
    blocks: list[tuple[int, float]] = []
    for offset, cluster_seconds in _cluster_offsets(stream):
        size_at = offset + 4
        size, pos, _ = _read_vint(stream, size_at, keep_marker=False)
        width = pos - size_at
        live[size_at:pos] = bytes([(0x100 >> width) | ((0x80 >> width) - 1)]) + b"\xff" * (width - 1)
        end = pos + size
        while pos < end:
            child_id, child_pos, _ = _read_vint(stream, pos, keep_marker=True)
            child_size, body, _ = _read_vint(stream, child_pos, keep_marker=False)
            if child_id == _SIMPLE_BLOCK_ID:
                _, timecode_at, _ = _read_vint(stream, body, keep_marker=False)  # track number
                relative_ms = int.from_bytes(stream[timecode_at : timecode_at + 2], "big", signed=True)
                blocks.append((pos, cluster_seconds + relative_ms / 1000))
            pos = body + child_size
    return _group_by_timeslice(bytes(live), blocks[1:], timeslice)


def split_inside_blocks(stream: bytes, *, timeslice: float = 2.0, into_block: int = 1) -> list[Chunk]:
    """Cut a live WebM stream as a recorder does when the timeslice fires while its muxer is part way
    through a block: each cut falls `into_block` bytes into the SimpleBlock that opens a slice
    (1: just after the block's ID byte, the byte Chromium's chunks end with; more: inside its size
    or payload, as on a loaded machine). The last chunk holds only the tail of the last block, so
    no chunk after 0 starts at an element boundary and the last one holds no block of its own."""
    blocks = simple_blocks(stream)
    if len(blocks) < 3:
        raise ValueError("too few SimpleBlocks to cut inside them")
    chunks = _group_by_timeslice(stream, blocks[1:-1], timeslice)
    cuts = [chunk_start(stream, chunk) + into_block for chunk in chunks[1:]] + [blocks[-1][0] + into_block]
    starts = [0, *cuts]
    ends = [*cuts, len(stream)]
    seconds = [0.0, *(chunk.start for chunk in chunks[1:]), blocks[-1][1]]
    return [Chunk(index=i, start=seconds[i], data=stream[a:b]) for i, (a, b) in enumerate(zip(starts, ends))]


def chunk_start(stream: bytes, chunk: Chunk) -> int:
    """Where `chunk` begins in `stream` (its bytes are a slice of it)."""
    return stream.index(chunk.data)


def simple_blocks(stream: bytes) -> list[tuple[int, float]]:
    """Byte offset and time (seconds) of every SimpleBlock of a live WebM stream, whose clusters
    may have unknown sizes."""
    found: list[tuple[int, float]] = []
    offsets = _cluster_offsets(stream)
    for number, (offset, cluster_seconds) in enumerate(offsets):
        _, pos, _ = _read_vint(stream, offset, keep_marker=True)
        size, pos, unknown = _read_vint(stream, pos, keep_marker=False)
        end = offsets[number + 1][0] if unknown and number + 1 < len(offsets) else (
            len(stream) if unknown else pos + size)
        while pos < end:
            child_id, child_pos, _ = _read_vint(stream, pos, keep_marker=True)
            child_size, body, _ = _read_vint(stream, child_pos, keep_marker=False)
            if child_id == _SIMPLE_BLOCK_ID:
                _, timecode_at, _ = _read_vint(stream, body, keep_marker=False)  # track number
                relative_ms = int.from_bytes(stream[timecode_at : timecode_at + 2], "big", signed=True)
                found.append((pos, cluster_seconds + relative_ms / 1000))
            pos = body + child_size
    return found


def _group_by_timeslice(stream: bytes, cut_points: list[tuple[int, float]], timeslice: float) -> list[Chunk]:
    """Chunks of `stream` that start at the first of `cut_points` (offset, seconds) in each slice."""
    # A point up to 50 ms before a slice boundary opens that slice: Opus packet timestamps sit
    # a few ms before round numbers because of the encoder's pre-skip.
    starts: list[tuple[int, float]] = [(0, 0.0)]
    last_slice = 0
    for offset, seconds in cut_points:
        slice_number = int((seconds + 0.05) / timeslice)
        if slice_number > last_slice:
            starts.append((offset, seconds))
            last_slice = slice_number
    ends = [offset for offset, _ in starts[1:]] + [len(stream)]
    return [Chunk(index=index, start=seconds, data=stream[offset:end])
            for index, ((offset, seconds), end) in enumerate(zip(starts, ends))]


def _read_vint(data: bytes, pos: int, *, keep_marker: bool) -> tuple[int, int, bool]:
    """Read an EBML variable-length integer at `pos`: (value, new position, is "unknown size")."""
    first = data[pos]
    length = 1
    mask = 0x80
    while length <= 8 and not first & mask:
        mask >>= 1
        length += 1
    if length > 8:
        raise ValueError(f"invalid EBML length byte at offset {pos}")
    value = first if keep_marker else first & (mask - 1)
    for byte in data[pos + 1 : pos + length]:
        value = (value << 8) | byte
    all_ones = (1 << (7 * length)) - 1
    unknown = not keep_marker and value == all_ones
    return value, pos + length, unknown


def _cluster_offsets(stream: bytes) -> list[tuple[int, float]]:
    """Byte offset and start time (seconds) of every Cluster in a WebM stream."""
    element_id, pos, _ = _read_vint(stream, 0, keep_marker=True)
    if element_id != _EBML_HEADER_ID:
        raise ValueError("stream does not start with an EBML header")
    size, pos, _ = _read_vint(stream, pos, keep_marker=False)
    pos += size
    element_id, pos, _ = _read_vint(stream, pos, keep_marker=True)
    if element_id != _SEGMENT_ID:
        raise ValueError("EBML header is not followed by a Segment")
    _, pos, _ = _read_vint(stream, pos, keep_marker=False)
    timecode_scale_s = 1e-3  # WebM's default TimecodeScale (1 ms); ffmpeg and browsers keep it
    clusters: list[tuple[int, float]] = []
    while pos < len(stream):
        start = pos
        element_id, pos, _ = _read_vint(stream, pos, keep_marker=True)
        size, pos, unknown = _read_vint(stream, pos, keep_marker=False)
        if element_id != _CLUSTER_ID:
            if unknown:
                raise ValueError(f"unknown-size element {element_id:#x} at offset {start}")
            pos += size
            continue
        cluster_end = len(stream) if unknown else pos + size
        timecode = None
        while pos < cluster_end:
            child_id, child_pos, _ = _read_vint(stream, pos, keep_marker=True)
            if unknown and child_id not in _CLUSTER_CHILD_IDS:
                break  # a live cluster ends where the next top-level element begins
            child_size, child_pos, _ = _read_vint(stream, child_pos, keep_marker=False)
            if child_id == _CLUSTER_TIMECODE_ID:
                timecode = int.from_bytes(stream[child_pos : child_pos + child_size], "big")
            pos = child_pos + child_size
        clusters.append((start, (timecode or 0) * timecode_scale_s))
    return clusters


@dataclass(frozen=True)
class Increment:
    """One call of transcribe_increment as the audio worker makes it after a chunk arrives."""

    chunk_index: int
    committed_before: float
    words: list[Word]
    committed_after: float
    seconds: float  # wall time of the transcribe_increment call
    context: str = ""  # the words committed before it, Whisper's prompt


def transcribe_chunk_by_chunk(model: "WhisperModel", chunks: list[Chunk]) -> list[Increment]:
    """Feed chunks one at a time the way the audio worker does: decode chunks 0..N, transcribe
    what is new (prompted with the last words committed before it), final on the last chunk."""
    stream = b""
    committed = 0.0
    increments: list[Increment] = []
    said: list[str] = []
    for chunk in chunks:
        stream += chunk.data
        pcm = decode_pcm(stream)
        context = " ".join(said[-CONTEXT_WORDS:])
        began = time.perf_counter()
        words, after = transcribe_increment(model, pcm, committed_until=committed,
                                            final=chunk.index == chunks[-1].index, context=context)
        increments.append(Increment(chunk.index, committed, words, after, time.perf_counter() - began, context))
        said.extend(word.text for word in words)
        committed = after
    return increments
