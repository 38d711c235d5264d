"""Think-aloud audio: clips, idempotent chunk uploads, incremental transcription, alignment to steps.

Chunks are files in storage addressed by content hash; a chunk is unique on (clip, index), so a
retried upload changes nothing. The `audio` worker transcribes clips incrementally (words are
committed only up to a settled pause, see annotation/speech.py), the new audio of every talker
waiting in one batched Whisper pass, and attaches every word to the step during which it was
spoken; the words of a human or edited step become its human thought."""
from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import time
import wave
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, Max, OuterRef
from django.utils import timezone

from annotation import audio_commands, audio_stream, speech, whisper_model
from annotation.alignment import StepWindow, align_words
from annotation.models import AudioChunk, AudioClip, TranscriptWord
from annotation.polish import step_human_thought_set
from rollouts.steps import step_words_wanted
from rollouts.events import episode_group, event_append, group_send
from rollouts.models import Event, Step
from core import redaction
from core.errors import ApplicationError

log = logging.getLogger(__name__)


@transaction.atomic
def clip_create(*, episode, user, client_id: str, content_type: str, started_at: float,
                voice_commands: bool = False) -> tuple[AudioClip, bool]:
    kind = audio_stream.normalise_content_type(content_type)
    if kind not in audio_stream.ACCEPTED_CONTENT_TYPES:
        raise ApplicationError(f"Audio of type '{content_type}' is not accepted; record WebM/Opus or Ogg/Opus.",
                               status=415)
    clip, created = AudioClip.objects.get_or_create(
        episode=episode, client_id=client_id[:64],
        defaults={"user": user, "content_type": kind, "started_at": started_at, "voice_commands": voice_commands})
    if clip.user_id != user.pk:
        raise ApplicationError("That clip belongs to someone else.", status=403)
    return clip, created


def chunk_store(*, clip: AudioClip, index: int, data: bytes, content_type: str, start_time: float) -> tuple[AudioChunk, bool]:
    """Check and store one chunk; (chunk, created). A repeat of a stored chunk changes nothing."""
    digest = hashlib.sha256(data).hexdigest()
    existing = AudioChunk.objects.filter(clip=clip, index=index).first()
    if existing is not None:
        if existing.sha256 != digest:
            raise ApplicationError(f"Chunk {index} is already stored with other content.", status=409)
        return existing, False
    header = None
    if index > 0:
        first = AudioChunk.objects.filter(clip=clip, index=0).first()
        if first is None:
            raise ApplicationError("Upload chunk 0 first: later chunks continue its stream.", status=409)
        with default_storage.open(first.file, "rb") as handle:
            header = handle.read()
    try:
        audio_stream.check_chunk(data=data, content_type=content_type, max_bytes=settings.LOUPE_AUDIO_MAX_BYTES,
                           header=header)
    except audio_stream.AudioError as exc:
        raise ApplicationError(str(exc), status=exc.status)
    name = f"audio/{digest[:2]}/{digest}.bin"
    if not default_storage.exists(name):
        default_storage.save(name, ContentFile(data))
    try:
        with transaction.atomic():
            chunk = AudioChunk.objects.create(clip=clip, index=index, start_time=start_time, file=name,
                                              size=len(data), sha256=digest)
    except IntegrityError:  # the same chunk raced in from a retry
        return AudioChunk.objects.get(clip=clip, index=index), False
    # By name: annotation.tasks imports this module (its tasks are thin), so this module does not import it.
    transaction.on_commit(lambda: current_app.send_task(TRANSCRIBE_TASK, args=(clip.pk,)))
    return chunk, True


TRANSCRIBE_TASK = "annotation.tasks.clip_transcribe"


def _contiguous_chunks(clip: AudioClip) -> list[AudioChunk]:
    chunks = []
    for expected, chunk in enumerate(clip.chunks.order_by("index")):
        if chunk.index != expected:
            break
        chunks.append(chunk)
    return chunks


# A WebM or Ogg clip is decoded from a chunk at least this long before its committed mark (by the chunks' stamps):
# the words after the mark are read from settled audio, not from the codec's first frames.
DECODE_BEFORE_S = 2.0
_RESUME_SEARCH_CHUNKS = 30  # chunks searched back for a place to start from, before decoding them all


def _read(chunk: AudioChunk) -> bytes:
    with default_storage.open(chunk.file, "rb") as handle:
        return handle.read()


def pcm_after(chunks: list[AudioChunk], committed_until: float):
    """The clip's audio (float32, 16 kHz, on the clip's clock) that holds everything after ``committed_until``:
    decoded from chunk 0's header and the chunks from the latest one at least DECODE_BEFORE_S before the mark that
    holds a place to decode from (a WebM Cluster, an Ogg page: ``audio_stream.stream_header``,
    ``audio_stream.resume_point``; they decode at their own time on the clip's clock, silence before), so that a long
    continuous recording costs
    each increment the same instead of decoding the whole clip again. The chunks are picked by the stamps the
    browser sent; when the audio they hold begins after the mark all the same (stamps that lie), and for WAV or
    when no chunk has such a place, every chunk is decoded: no audio is skipped."""
    tail = _tail_stream(chunks, committed_until)
    if tail is not None:
        pcm, begins = audio_stream.decode_pcm_from(tail)
        if begins <= committed_until:
            return pcm
        log.warning("clip %s: the chunks picked by their stamps begin at %.1f s, after the mark at %.1f s; "
                    "decoding the whole clip", chunks[0].clip_id, begins, committed_until)
    return audio_stream.decode_pcm(b"".join(_read(c) for c in chunks))


def _tail_stream(chunks: list[AudioChunk], committed_until: float) -> bytes | None:
    settled = chunks[0].start_time + committed_until - DECODE_BEFORE_S  # on the session clock, as the stamps are
    latest = max((i for i in range(1, len(chunks)) if chunks[i].start_time <= settled), default=0)
    if not latest:
        return None
    first = _read(chunks[0])
    kind = audio_stream.container_of(first)
    if kind not in ("webm", "ogg"):
        return None
    for start in range(latest, max(0, latest - _RESUME_SEARCH_CHUNKS), -1):
        data = _read(chunks[start])
        at = audio_stream.resume_point(data, kind)
        if at is not None:
            try:
                header = audio_stream.stream_header(first)
            except audio_stream.AudioError:
                return None
            return header + data[at:] + b"".join(_read(c) for c in chunks[start + 1:])
    return None


_LABEL = re.compile(r"^\[[A-Z_]+\]$")  # a word stored redacted (_words_redacted)


def clip_playback(clip: AudioClip) -> tuple[bytes, str]:
    """(bytes, content type) of what reviewers play: the recording as uploaded, or, where words of it were stored
    redacted, its audio with those words silenced (core.redaction.pcm_silence), as 16 kHz WAV on the same clock
    (made once, kept in storage by what it was made from)."""
    chunks = list(clip.chunks.order_by("index"))
    body = b"".join(_read(c) for c in chunks)
    origin = chunks[0].start_time if chunks else clip.started_at
    spans = [(w.start - origin, w.end - origin) for w in clip.words.order_by("position") if _LABEL.match(w.word)]
    if not spans:
        return body, clip.content_type.split(";")[0]
    key = hashlib.sha256(body + json.dumps(spans).encode()).hexdigest()
    name = f"audio/redacted/{key[:2]}/{key}.wav"
    if not default_storage.exists(name):
        pcm = redaction.pcm_silence(audio_stream.decode_pcm(body), audio_stream.SAMPLE_RATE, spans)
        out = io.BytesIO()
        with wave.open(out, "wb") as handle:
            handle.setnchannels(1), handle.setsampwidth(2), handle.setframerate(audio_stream.SAMPLE_RATE)
            handle.writeframes((pcm.clip(-1, 1) * 32767).astype("<i2").tobytes())
        default_storage.save(name, ContentFile(out.getvalue()))
    with default_storage.open(name, "rb") as handle:
        return handle.read(), "audio/wav"


def step_windows(episode_id: int) -> list[StepWindow]:
    """Each step's interval on the session clock (server epoch seconds): from the end of the previous step
    (when its proposal appeared, or the person began acting) to the end of its own execution."""
    executed = {e.payload.get("index"): e.created_at.timestamp()
                for e in Event.objects.filter(episode_id=episode_id, type="step.executed").only("payload", "created_at")}
    started = Event.objects.filter(episode_id=episode_id, type="episode.state", payload__status="running") \
        .order_by("seq").values_list("created_at", flat=True).first()
    windows, previous_end = [], started.timestamp() if started else 0.0
    for index in sorted(i for i in executed if isinstance(i, int)):
        windows.append(StepWindow(index=index, start=previous_end, end=executed[index]))
        previous_end = executed[index]
    windows.append(StepWindow(index=len(windows), start=previous_end, end=None))  # the step in progress
    return windows


# At most this many clips share a Whisper pass: a pass's time grows with its clips, and the words of all of them wait
# for it.
BATCH_CLIPS = 8


def waiting_clips(*, exclude: int):
    """The clips still recording, other than ``exclude``, with audio not yet transcribed, oldest first, locked for
    this transaction (those another worker holds are skipped). Found by the partial index on unfinished clips."""
    new_audio = Exists(AudioChunk.objects.filter(clip=OuterRef("pk"), index__gte=OuterRef("transcribed_chunks")))
    return (AudioClip.objects.select_for_update(skip_locked=True).filter(new_audio, finished=False)
            .exclude(pk=exclude).order_by("pk"))


def clip_transcribe(*, clip_id: int, final: bool = False) -> int:
    """Transcribe what is new in a clip, in one Whisper pass with what is new in every other clip that has audio
    waiting (up to BATCH_CLIPS; their own jobs then find nothing new). Returns the number of words committed for
    ``clip_id``. Safe to retry: a clip's words depend on its own audio and committed words only."""
    published = []
    with transaction.atomic():
        clip = AudioClip.objects.select_for_update(skip_locked=True).filter(pk=clip_id).first()
        if clip is None:
            return 0  # another worker holds it; it will pick up this chunk too
        others = list(waiting_clips(exclude=clip_id)[:BATCH_CLIPS - 1])
        began = time.perf_counter()
        turns = [turn for turn in (_turn(c, final=(final and c.pk == clip_id) or c.finished, named=c.pk == clip_id)
                                   for c in [clip, *others]) if turn is not None]
        if not turns:
            return 0
        decoded = time.perf_counter()
        readings = speech.transcribe_pending(whisper_model.load_model(settings.LOUPE_WHISPER_MODEL or None),
                                             [turn.pending for turn in turns])
        read = time.perf_counter()
        stored_for = {}
        for turn, reading in zip(turns, readings):
            stored_for[turn.clip.pk], interim = _reading_store(turn, reading)
            if not turn.pending.final:
                published.append((turn, interim))
        whisper = {part: round(seconds, 3) for part, seconds in speech.PASS_SECONDS.items()}
        speech.PASS_SECONDS.update(dict.fromkeys(speech.PASS_SECONDS, 0.0))
        log.info("transcription pass: %s", json.dumps({
            "clips": len(turns), "decode_s": round(decoded - began, 3), "whisper_s": round(read - decoded, 3),
            **whisper, "store_s": round(time.perf_counter() - read, 3)}))
    for turn, interim in published:  # the newest audio, still being spoken: a provisional reading
        _interim_publish(turn.clip, interim, origin=turn.origin, committed_until=turn.committed_after)
    return stored_for.get(clip_id, 0)


@dataclass
class _Turn:
    """A clip's part in a pass: its contiguous chunks and its audio waiting (speech.Pending)."""

    clip: AudioClip
    chunks: list[AudioChunk]
    pending: speech.Pending
    origin: float  # session-clock time of the clip's first sample
    committed_after: float = 0.0


def _turn(clip: AudioClip, *, final: bool, named: bool) -> _Turn | None:
    """The clip's turn in the pass, or None: no chunk yet; nothing new since its last pass (unless this is its
    final one); audio that no longer decodes (another clip's, skipped so that one clip's damage costs only its own
    words: its own job reports it)."""
    chunks = _contiguous_chunks(clip)
    final = final or clip.finished
    if not chunks or (clip.transcribed_chunks >= len(chunks) and not final):
        return None
    try:
        pcm = pcm_after(chunks, clip.committed_until)
    except audio_stream.AudioError:
        if named:
            raise
        log.warning("clip %s: its audio does not decode; left to its own job", clip.pk, exc_info=True)
        return None
    hint = audio_commands.PROMPT if clip.voice_commands else ""
    return _Turn(clip=clip, chunks=chunks, origin=chunks[0].start_time,
                 pending=speech.Pending(pcm, clip.committed_until, final, _context(clip), interim=not final, hint=hint))


def _reading_store(turn: _Turn, reading: speech.Reading) -> tuple[int, list]:
    """Store a clip's newly committed words (commands sent, personal data redacted), move its mark, align its
    episode's words to steps and tell the episode's watchers. Returns (words stored, the provisional words)."""
    clip, origin = turn.clip, turn.origin
    words, committed_until, interim = reading.words, reading.committed_until, reading.interim
    if clip.voice_commands and not turn.pending.final:
        kept, committed_until = _command_held(words, committed_until, clip.committed_until)
        interim = words[len(kept):] + interim  # a command still being spoken is shown, not yet sent
        words = kept
    words = _commands_sent(clip, words, origin) if clip.voice_commands else words
    texts = _words_redacted(clip, words)
    position = clip.words.count()
    stored = [TranscriptWord(clip=clip, position=position + i, word=text, start=origin + w.start,
                             end=origin + w.end, probability=w.probability)
              for i, (w, text) in enumerate(zip(words, texts))]
    TranscriptWord.objects.bulk_create(stored)
    clip.committed_until = committed_until
    clip.transcribed_chunks = len(turn.chunks)
    clip.save(update_fields=["committed_until", "transcribed_chunks"])
    turn.committed_after = committed_until
    changed = words_align(episode_id=clip.episode_id)
    if stored:
        event_append(episode_id=clip.episode_id, type="transcript.words", payload={
            "clip": clip.pk, "username": clip.user.username,
            "words": [{"word": w.word, "start": w.start, "end": w.end, "step": changed.get(w.position)}
                      for w in stored]})
    return len(stored), interim


def _command_held(words: list, committed_until: float, before: float) -> tuple[list, float]:
    """The words to commit now and the new mark: a command still being spoken at the increment's end ("reject,"
    with its reason to come) is left uncommitted, to be read whole with what follows (audio_commands.held_from)."""
    held = audio_commands.held_from([(w.text, w.start, w.end) for w in words], committed_until)
    if held is None:
        return words, committed_until
    mark = max(before, words[held].start - 0.15)
    return words[:held], mark


def _commands_sent(clip: AudioClip, words: list, origin: float) -> list:
    """Voice steering: each utterance of ``words`` that is a command (audio_commands) becomes a ``voice.command``
    event for the page, which shows it for a second and then sends it as its key would; the rest is returned, to be
    stored as think-aloud words. A command is never also a thought."""
    found = audio_commands.commands_in([(w.text, w.start, w.end) for w in words])
    used = set()
    policy = redaction.policy_of(clip.episode.project.settings) if found else None
    for command, positions in found:
        used.update(positions)
        said = {**command.payload(), "words": " ".join(words[p].text.strip() for p in positions)}
        said = redaction.value_redact(said, policy)  # a reject's reason is stored: as this event, as the rejection
        event_append(episode_id=clip.episode_id, type="voice.command", payload={
            **said, "clip": clip.pk, "username": clip.user.username,
            "start": origin + words[positions[0]].start, "end": origin + words[positions[-1]].end})
    return [w for i, w in enumerate(words) if i not in used]


def _words_redacted(clip: AudioClip, words: list) -> list[str]:
    """The words' texts as stored: each that is part of personal data under the project's policy (core.redaction;
    a number read across several words too) is stored as its kind's label, so no transcript, thought or export
    holds it."""
    texts = [w.text for w in words]
    policy = redaction.policy_of(clip.episode.project.settings)
    for position, kind in redaction.word_spans([(w.text, w.start, w.end) for w in words], policy):
        texts[position] = f"[{kind.upper()}]"
    return texts


def _context(clip: AudioClip) -> str:
    """The clip's last committed words, in order: what was said just before its uncommitted audio."""
    last = clip.words.order_by("-position").values_list("word", flat=True)[:speech.CONTEXT_WORDS]
    return " ".join(reversed(list(last)))


def _interim_publish(clip: AudioClip, words: list, *, origin: float, committed_until: float) -> None:
    """Send the uncommitted audio's provisional words to the episode's watchers. They are a view, not a
    record: not stored, carrying no seq, replaced by the next interim or by the committed words."""
    try:
        group_send(episode_group(clip.episode_id), {
            "type": "transcript.interim", "clip": clip.pk, "username": clip.user.username,
            "committed_until": origin + committed_until,
            "words": [{"word": w.text, "start": origin + w.start, "end": origin + w.end} for w in words]})
    except Exception:  # a courtesy: the committed words still come
        log.warning("interim transcript of clip %s not sent", clip.pk, exc_info=True)


def words_align(*, episode_id: int) -> dict[int, int | None]:
    """Attach words to steps (again, as steps are executed); steps a person acted on or approved get the words as
    their human thought. Returns {word position: step index} for the words of this episode."""
    windows = step_windows(episode_id)
    words = list(TranscriptWord.objects.filter(clip__episode_id=episode_id).order_by("start", "clip_id", "position"))
    if not words:
        return {}
    indices = align_words([(w.start, w.end) for w in words], windows)
    steps = {s.index: s for s in Step.objects.filter(episode_id=episode_id)}
    by_step: dict[int, list[str]] = {}
    result = {}
    for word, index in zip(words, indices):
        step = steps.get(index) if index is not None else None
        result[word.position] = index
        if (word.step_id if word.step_id else None) != (step.pk if step else None):
            TranscriptWord.objects.filter(pk=word.pk).update(step=step)
        if step is not None:
            by_step.setdefault(step.index, []).append(word.word)
    for index, texts in by_step.items():
        step = steps[index]
        text = " ".join(t.strip() for t in texts).strip()
        if step_words_wanted(step) and step.human_thought != text:  # then polished: annotation/polish.py
            step_human_thought_set(step=step, text=text)
    return result


def clips_stalled(*, older_than_seconds: float, within_seconds: float = 3600) -> list[tuple[int, bool]]:
    """Clips whose audio no transcription job has finished with: an uploaded chunk not yet transcribed, or a
    finished clip whose final pass has not committed up to its last chunk (its job's worker was killed: the
    broker redelivers an unacknowledged job only after its visibility timeout). Only clips whose newest chunk
    came between `within_seconds` and `older_than_seconds` ago. Returns (clip id, finished)."""
    now = timezone.now()
    candidates = (AudioClip.objects.annotate(n=Count("chunks"), newest=Max("chunks__created_at"))
                  .filter(n__gt=0, newest__lt=now - timedelta(seconds=older_than_seconds),
                          newest__gte=now - timedelta(seconds=within_seconds)))
    stalled = []
    for clip in candidates:
        chunks = _contiguous_chunks(clip)
        if not chunks:
            continue
        untranscribed = clip.transcribed_chunks < len(chunks)
        last_offset = chunks[-1].start_time - chunks[0].start_time
        final_missing = clip.finished and clip.committed_until + 0.5 < last_offset
        if untranscribed or final_missing:
            stalled.append((clip.pk, clip.finished))
    return stalled
