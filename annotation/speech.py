"""Think-aloud speech: transcribing the audio of several talkers incrementally, in batched Whisper passes.

Each clip's audio after its committed mark is cut at a pause in the speech that cannot move as more audio arrives
(Silero VAD); the audio before the cut is read once, with the clip's committed words as Whisper's prompt, and its
words are committed; the audio after it is read greedily as provisional (interim) words. Only that audio is
encoded: the encoder's input is the pending seconds (padded to the longest piece of the batch), not Whisper's 30 s
window, and the pieces of all the clips one worker has pending are encoded and decoded as one batch
(`transcribe_pending`). Only after 24 s of speech without a pause is a cut forced, at the quietest gap between
words. The cuts come from the audio alone and decoding is deterministic (beam search or greedy, temperature 0), so
a worker that dies mid-job and retries with the same audio produces the same words.

Django-free: the audio worker (annotation/audio.py) decodes chunks with annotation/audio_stream.py, loads the model
with annotation/whisper_model.py and calls `transcribe_pending`. faster-whisper is imported lazily so that the web
process never loads it.
"""

from __future__ import annotations

import bisect
import logging
import re
import time
from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from annotation.audio_stream import SAMPLE_RATE

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

log = logging.getLogger(__name__)

# --- incremental transcription ----------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    """A transcribed word; `start` and `end` are seconds from the clip's start."""

    text: str
    start: float
    end: float
    probability: float


@dataclass(frozen=True)
class Pending:
    """One clip's turn in a pass: all its audio so far (float32 mono 16 kHz on the clip's clock; the samples well
    before the mark may be silence), its committed mark, whether the clip has ended, the committed words before
    the mark (Whisper's prompt), whether to read the audio after the new mark provisionally as well, and words to
    put before the context in the prompt, kept whole (a grammar the speaker uses: annotation/audio_commands.py)."""

    pcm: np.ndarray
    committed_until: float
    final: bool
    context: str = ""
    interim: bool = False
    hint: str = ""


@dataclass(frozen=True)
class Reading:
    """What a pass made of one clip: the newly committed words, the new mark, and the provisional words after it."""

    words: list[Word]
    committed_until: float
    interim: list[Word]


# A pause at least this long is a safe place to cut: no word spans it (the pause at a comma is 150-250 ms; the
# silence inside a word, before a stop consonant, under 100 ms).
_CUT_SILENCE_MS = 150
# Speech that ended this long before the end of the audio so far is finished, for now.
_SETTLED_SILENCE_S = 0.8
# Whisper is more accurate with context, so a cut waits for this much audio unless the speaker has stopped (the
# provisional words show it sooner). The words committed before a cut are Whisper's prompt (`context`), which keeps
# short pieces as accurate as long ones.
_MIN_COMMIT_S = 2.0
# How many of the committed words before the audio are its context.
CONTEXT_WORDS = 30
# Past this much uncommitted audio without a pause, cut between words anyway (Whisper's window is 30 s).
_MAX_PENDING_S = 24.0
# Silence this close to the end of the audio so far may be the start of a word; a forced cut stays twice this far
# from the end, where Whisper's word times are unreliable.
_HOLDBACK_S = 1.0
# Provisional words are read only from this much audio: less rarely holds a whole word.
_MIN_INTERIM_S = 0.5


def transcribe_pending(model: "WhisperModel", clips: Sequence[Pending]) -> list[Reading]:
    """Commit and provisionally read the audio after each clip's mark, all clips in one batched Whisper pass.

    Words are committed only up to a pause in the speech that cannot move as more audio arrives (or, when the clip
    is `final`, up to its end): a word whose middle lies before the pause is committed, the rest are provisional,
    and the next pass starts in the pause, so it neither repeats nor loses a word at the boundary. Each clip is
    one piece of the batch: its pending audio, read with its committed words as the prompt. A retry with the same
    audio, mark and context reads the same piece with the same prompt (beside other clips, whose rows share its
    matrix products; the caller stores the words with the mark, so a retry neither repeats nor loses a word).
    """
    plans = [_plan(clip) for clip in clips]
    pieces = [plan.piece for plan in plans if plan.piece is not None]
    read = dict(zip(map(id, pieces), _read(model, pieces)))
    readings = []
    for clip, plan in zip(clips, plans):
        if plan.forced:
            words, until = _commit_between_words(model, plan, clip.context, clip.hint)
            readings.append(Reading(words=words, committed_until=until, interim=[]))
            continue
        words = read[id(plan.piece)] if plan.piece is not None else []
        committed = [w for w in words if (w.start + w.end) / 2 < plan.until]
        committed = [w if w.end <= plan.until else Word(w.text, w.start, plan.until, w.probability)
                     for w in committed]
        interim = [w for w in words if (w.start + w.end) / 2 >= plan.until] if clip.interim else []
        readings.append(Reading(words=committed, committed_until=plan.until, interim=interim))
    return readings


def transcribe_increment(model: "WhisperModel", pcm: np.ndarray, *, committed_until: float,
                         final: bool, context: str = "", hint: str = "") -> tuple[list[Word], float]:
    """`transcribe_pending` for one clip, without provisional words: (newly committed words, new mark)."""
    reading = transcribe_pending(model, [Pending(pcm, committed_until, final, context, hint=hint)])[0]
    return reading.words, reading.committed_until


@dataclass(frozen=True)
class _Piece:
    """Audio to read: its words are shifted by `offset` onto the clip's clock and kept within [offset, limit]."""

    audio: np.ndarray
    offset: float
    limit: float
    context: str = ""
    beam_size: int = 5
    hint: str = ""
    speech: tuple[tuple[float, float], ...] = ()  # the VAD's speech spans on the clip's clock


@dataclass(frozen=True)
class _Plan:
    until: float  # the new mark, when no cut is forced
    piece: _Piece | None = None  # the audio to read, from the mark
    forced: bool = False
    pending: np.ndarray | None = None  # for a forced cut
    offset: float = 0.0


def _plan(clip: Pending) -> _Plan:
    """Where to cut a clip's pending audio (from the audio alone: Silero VAD), and the piece to read for it: up to
    the cut when only committed words are wanted (it ends in the pause), all of it when provisional ones are too,
    none when the VAD hears no speech in what would be read."""
    if clip.pcm.ndim != 1:
        raise ValueError(f"pcm must be mono (one dimension), not shape {clip.pcm.shape}")
    start_sample = min(len(clip.pcm), max(0, round(clip.committed_until * SAMPLE_RATE)))
    pending = np.ascontiguousarray(clip.pcm[start_sample:], dtype=np.float32)
    offset = start_sample / SAMPLE_RATE
    if len(pending) < SAMPLE_RATE // 10:  # too little audio to hold a word
        return _Plan(until=max(clip.committed_until, len(clip.pcm) / SAMPLE_RATE) if clip.final
                     else clip.committed_until)
    speech = _speech(pending)
    cut = len(pending) if clip.final else _settled_cut(pending, speech)
    if cut is None and len(pending) >= _MAX_PENDING_S * SAMPLE_RATE:
        return _Plan(until=clip.committed_until, forced=True, pending=pending, offset=offset)
    cut = cut or 0
    until = (start_sample + cut) / SAMPLE_RATE if cut else clip.committed_until
    spoken_before = any(span["start"] < cut for span in speech)
    spoken_after = (clip.interim and len(pending) - cut >= _MIN_INTERIM_S * SAMPLE_RATE
                    and any(span["end"] > cut for span in speech))
    end = len(pending) if spoken_after else cut
    if not (spoken_before or spoken_after):
        return _Plan(until=until)
    # Words only shown, never stored, are read greedily (about half the decoder's time of a beam of 5).
    return _Plan(until=until, piece=_Piece(pending[:end], offset=offset, limit=offset + end / SAMPLE_RATE,
                                           context=clip.context, beam_size=5 if spoken_before else 1,
                                           hint=clip.hint, speech=tuple(
                                               (offset + span["start"] / SAMPLE_RATE,
                                                offset + span["end"] / SAMPLE_RATE) for span in speech)))


def _speech(audio: np.ndarray) -> list[dict]:
    """Silero VAD's speech spans of `audio` (samples), split at pauses of _CUT_SILENCE_MS."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    return get_speech_timestamps(audio, VadOptions(min_silence_duration_ms=_CUT_SILENCE_MS, speech_pad_ms=0),
                                 sampling_rate=SAMPLE_RATE)


def _settled_cut(pending: np.ndarray, speech: list[dict]) -> int | None:
    """The sample at which to cut the pending audio, if a settled pause exists.

    Returns the middle of the latest pause between speech (or just after speech that ended
    `_SETTLED_SILENCE_S` ago), provided enough audio comes before it; a cut through pure silence
    when nobody has spoken; None to wait for more audio. A pause followed by more speech cannot
    change as audio arrives, since Silero VAD reads the audio front to back.
    """
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


def _commit_between_words(model: "WhisperModel", plan: _Plan, context: str,
                          hint: str) -> tuple[list[Word], float]:
    """For speech with no pause long enough to cut at: cut at the quietest boundary between two
    words, away from the end of the audio (where Whisper's word times are least reliable), and
    commit what the audio before the cut says, read on its own as at a pause. Whisper's
    word times are rough, so a word next to a forced cut may be lost; pauses make this rare."""
    pending, offset = plan.pending, plan.offset
    (words,) = _read(model, [_Piece(pending, offset=offset, limit=offset + len(pending) / SAMPLE_RATE,
                                    context=context, hint=hint)])
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
    (words,) = _read(model, [_Piece(pending[:cut], offset=offset, limit=until, context=context, hint=hint)])
    return words, until


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


# --- reading pieces: one batched Whisper pass -------------------------------------------------

# A piece is padded with silence to a whole number of these seconds, and to at least _MIN_WINDOW_S: pieces of about
# the same length share an encoder call, and the encoder reads that window instead of Whisper's 30 s (its cost grows
# faster than the window: attention is quadratic). Below ~10 s tiny.en starts to read a piece's words twice.
_WINDOW_STEP_S = 2.0
_MIN_WINDOW_S = 10.0
# Silence before a piece: read from the first sample of its speech, tiny.en in a short window made "Now I type"
# "And now I type", and "Approve." "I approve."
_LEAD_S = 0.3
_HOP = 160  # samples per mel frame
# Generation stops after this many tokens a second of audio (and 10 more): speech is under 6, so a longer reading is
# a loop, cut short instead of running to Whisper's 448 tokens.
_TOKENS_PER_S = 8
_PUNCTUATION_BEFORE, _PUNCTUATION_AFTER = "\"'“¿([{-", "\"'.。,，!！?？:：”)]}、"


def _read(model: "WhisperModel", pieces: Sequence[_Piece]) -> list[list[Word]]:
    """Whisper's words for each piece. Pieces of one beam size and padded window are encoded and decoded as one
    batch; a prompted reading that runs away is read again without its prompt."""
    tokenizer = _tokenizer(model)
    prompts = [_prompt(model, tokenizer, piece.context, piece.hint) for piece in pieces]
    # CTranslate2 decodes a batch only with the start token at one position: prompts of one length.
    groups: dict[tuple[int, int, int], list[int]] = {}
    for position, piece in enumerate(pieces):
        key = (piece.beam_size, _window(len(piece.audio)), len(prompts[position]))
        groups.setdefault(key, []).append(position)
    words: list[list[Word]] = [[] for _ in pieces]
    ran_away: list[int] = []
    for (beam_size, window, _), members in groups.items():
        for position, (found, loop) in zip(members, _read_batch(model, [pieces[p] for p in members],
                                                                   [prompts[p] for p in members], window, beam_size)):
            words[position] = found
            if loop and (pieces[position].context or pieces[position].hint):
                ran_away.append(position)
    if ran_away:
        # A prompt can send Whisper into a loop ("see you in the next video" over and over): read the audio again on
        # its own.
        log.info("%d prompted reading(s) ran away; read again without the prompt", len(ran_away))
        again = _read(model, [_Piece(pieces[p].audio, pieces[p].offset, pieces[p].limit,
                                     beam_size=pieces[p].beam_size) for p in ran_away])
        for position, found in zip(ran_away, again):
            words[position] = found
    return words


# Seconds this process spent in Whisper's parts since the audio worker last logged them (its profile of a pass).
PASS_SECONDS = {"encoder": 0.0, "decoder": 0.0, "align": 0.0}


def _window(samples: int) -> int:
    samples += int(_LEAD_S * SAMPLE_RATE)
    step = int(_WINDOW_STEP_S * SAMPLE_RATE)
    return min(30 * SAMPLE_RATE, max(int(_MIN_WINDOW_S * SAMPLE_RATE), -(-samples // step) * step))


def _read_batch(model: "WhisperModel", pieces: list[_Piece], prompts: list[list[int]], window: int,
                beam_size: int) -> list[tuple[list[Word], bool]]:
    """(words, whether the reading ran away) for pieces read in one encoder and one decoder call."""
    import ctranslate2
    from faster_whisper.transcribe import get_compression_ratio, get_suppressed_tokens

    tokenizer = _tokenizer(model)
    frames = window // _HOP
    lead = int(_LEAD_S * SAMPLE_RATE)
    audios = [np.concatenate([np.zeros(lead, dtype=np.float32), piece.audio])[:window] for piece in pieces]
    features = np.stack([model.feature_extractor(np.pad(audio, (0, window - len(audio))), padding=0)[:, :frames]
                         for audio in audios])
    began = time.perf_counter()
    encoded = model.encode(features)
    encoded_at = time.perf_counter()
    new_tokens = [int(len(piece.audio) / SAMPLE_RATE * _TOKENS_PER_S) + 10 for piece in pieces]
    results = model.model.generate(
        encoded, prompts, beam_size=beam_size, max_length=min(model.max_length, max(
            len(prompt) + tokens for prompt, tokens in zip(prompts, new_tokens))),
        suppress_blank=True, suppress_tokens=get_suppressed_tokens(tokenizer, [-1]),
        return_scores=True, return_no_speech_prob=True)
    generated_at = time.perf_counter()
    PASS_SECONDS["encoder"] += encoded_at - began
    PASS_SECONDS["decoder"] += generated_at - encoded_at
    tokens = []
    for result in results:
        ids = [token for token in result.sequences_ids[0] if token < tokenizer.eot]
        average = result.scores[0] * len(result.sequences_ids[0]) / (len(result.sequences_ids[0]) + 1)
        silent = result.no_speech_prob > 0.6 and average < -1.0  # Whisper's own rule for a window of silence
        tokens.append([] if silent else ids)
    spoken = [position for position, ids in enumerate(tokens) if ids]
    found: list[tuple[list[Word], bool]] = [([], False) for _ in pieces]
    if not spoken:
        return found
    if len(spoken) < len(pieces):
        encoded = ctranslate2.StorageView.from_array(np.ascontiguousarray(np.array(encoded)[spoken]))
    segments = [[{"tokens": tokens[p], "seek": 0, "start": 0.0, "end": len(audios[p]) / SAMPLE_RATE}]
                for p in spoken]
    model.add_word_timestamps(segments, tokenizer, encoded, [len(audios[p]) // _HOP for p in spoken],
                              _PUNCTUATION_BEFORE, _PUNCTUATION_AFTER, 0.0)
    PASS_SECONDS["align"] += time.perf_counter() - generated_at
    for p, (segment,) in zip(spoken, segments):
        piece = pieces[p]
        text = tokenizer.decode(tokens[p])
        words = []
        for word in segment.get("words") or ():
            said = word["word"].strip()
            if not said:
                continue
            start = min(max(piece.offset - _LEAD_S + float(word["start"]), piece.offset), piece.limit)
            end = min(max(piece.offset - _LEAD_S + float(word["end"]), start), piece.limit)
            words.append(Word(text=said, start=round(start, 3), end=round(end, 3),
                              probability=round(float(word["probability"]), 4)))
        words = _without_echo(_within_speech(words, piece.speech))
        seconds = len(piece.audio) / SAMPLE_RATE
        loop = (len(tokens[p]) >= new_tokens[p] or get_compression_ratio(text) > _LOOP_COMPRESSION_RATIO
                or len(words) > _MAX_WORDS_PER_SECOND * seconds + 3)
        found[p] = (words, loop)
    return found


# A word ends at most this long after the speech the VAD heard it in: Whisper stretches a sentence's last word over
# the pause after it, which would join the next utterance to it (a command said after a thought went unheard).
_SPEECH_PAD_S = 0.1


def _within_speech(words: list[Word], speech: tuple[tuple[float, float], ...]) -> list[Word]:
    if not speech:
        return words
    ends = [end for _, end in speech]
    starts = [start for start, _ in speech]
    out = []
    for word in words:
        at = max(0, bisect.bisect_right(starts, word.start) - 1)
        end = max(word.start, min(word.end, ends[at] + _SPEECH_PAD_S))
        out.append(word if end == word.end else Word(word.text, word.start, round(end, 3), word.probability))
    return out


def _without_echo(words: list[Word]) -> list[Word]:
    """The words without a squeezed repeat at their end: in a window mostly silence, tiny.en may read a piece's last
    words again, crammed into the last instant ("Take over. Take over.", the second in 0.2 s), or into the pause
    after them, where a word that starts after the speech the VAD heard is left no time (_within_speech). A repeat
    that takes at least half its first saying's time, every word of it with some, is kept: that was said twice."""
    key = [_normalised_words(w.text) for w in words]
    changed = True
    while changed:
        changed = False
        for n in range(len(words) // 2, 0, -1):
            first, second = words[-2 * n:-n], words[-n:]
            if key[-2 * n:-n] == key[-n:] and (second[-1].end - second[0].start
                                                 <= 0.5 * (first[-1].end - first[0].start)
                                                 or any(word.end <= word.start for word in second)):
                words, key, changed = words[:-n], key[:-n], True
                break
    return words


# Whisper's own signs of a runaway decode: text that compresses this well is a loop (its default threshold), and
# no one says this many words a second.
_LOOP_COMPRESSION_RATIO = 2.4
_MAX_WORDS_PER_SECOND = 6.0

# The prompt is the last this many tokens of the committed words (CONTEXT_WORDS of them hold more): once a clip has
# said that much, its prompts all have one length and batch with the other clips'.
_PROMPT_TOKENS = 32

_tokenizers: dict[int, object] = {}


def _tokenizer(model: "WhisperModel"):
    tokenizer = _tokenizers.get(id(model))
    if tokenizer is None:
        from faster_whisper.tokenizer import Tokenizer

        tokenizer = _tokenizers[id(model)] = Tokenizer(model.hf_tokenizer, model.model.is_multilingual,
                                                       task="transcribe", language="en")
    return tokenizer


def _prompt(model: "WhisperModel", tokenizer, context: str, hint: str = "") -> list[int]:
    """The decoder's start: the committed words before the piece (as Whisper's previous text), then the start of a
    transcript in English without timestamps (word times come from the alignment heads)."""
    previous = tokenizer.encode(" " + context.strip())[-_PROMPT_TOKENS:] if context.strip() else []
    previous = (tokenizer.encode(" " + hint.strip()) if hint.strip() else []) + previous
    return model.get_prompt(tokenizer, previous_tokens=previous, without_timestamps=True)


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
