"""Voice steering's figures (issue 40), for `bench/bench_audio.py --commands`.

A session of think-aloud sentences and spoken commands (espeak-ng, at two speaking rates) is cut into chunks as the
page's recorder cuts them, and each chunk is handled when the recorder would hand it over, the way the audio worker
does (decode, transcribe_increment prompted with the grammar, a command still being spoken held back, commands_in).
Reported:

- the error rate: spoken commands not recognised as the command said (wrong kind, outcome, or missed), and
  think-aloud sentences taken for a command (they must stay thoughts);
- the reasons' word error rate;
- the latency from the end of each spoken command to its recognition (the voice.command event), with the chunk's
  wait and the transcription's time, processing one increment at a time as one audio worker does; and to its ack:
  that plus the page's one-second hold and the socket's round trip for the command, measured here on the real
  command path (annotation.services.command_submit, which stores and acknowledges it) when a database is at hand.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

from annotation import audio_commands
from annotation.audio_commands import VoiceCommand
from annotation.audio_stream import decode_pcm
from annotation.speech import CONTEXT_WORDS, transcribe_increment, word_error_rate
from annotation.whisper_model import load_model
from tests.annotation import audio_fixtures

HOLD_S = 1.0  # the page's pending second (frontend/src/session/VoiceCommandBar.tsx VOICE_HOLD_MS)
PAUSE_S = 2.0

# (what is said, the command it is, or None for speech that must stay a thought)
SCRIPT = [
    ("The agent opened the settings page.", None),
    ("Approve.", VoiceCommand("approve")),
    ("Reject, that is the wrong button.", VoiceCommand("reject", reason="that is the wrong button")),
    ("I would approve this one if it scrolled first.", None),
    ("Take over.", VoiceCommand("takeover")),
    ("Hand back.", VoiceCommand("handback")),
    ("Pause.", VoiceCommand("pause")),
    ("Resume.", VoiceCommand("resume")),
    ("Reject, it should scroll down first.", VoiceCommand("reject", reason="it should scroll down first")),
    ("Finish the form first and then submit it.", None),
    ("Finish with success.", VoiceCommand("finish", outcome="success")),
    ("Finish as failure.", VoiceCommand("finish", outcome="failure")),
]


def _session_wav(folder: Path, rate_wpm: int) -> tuple[Path, list[tuple[float, float]]]:
    """The script spoken in one recording, PAUSE_S of silence after each part; (start, end) of each part."""
    pcm, spans, at, rate = [], [], 0.5, 22050
    for i, (text, _) in enumerate(SCRIPT):
        spoken = audio_fixtures.synthesize_wav(text, folder / f"{rate_wpm}-{i}.wav", rate_wpm=rate_wpm)
        with wave.open(str(spoken)) as w:
            rate = w.getframerate()
            samples = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
        if not pcm:
            pcm.append(np.zeros(int(0.5 * rate), dtype=np.int16))
        spans.append((at, at + len(samples) / rate))
        pcm += [samples, np.zeros(int(PAUSE_S * rate), dtype=np.int16)]
        at += len(samples) / rate + PAUSE_S
    path = folder / f"session-{rate_wpm}.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(rate)
        out.writeframes(np.concatenate(pcm).tobytes())
    return path, spans


def _recognised(model, chunks, timeslice: float) -> list[tuple[VoiceCommand, float, float, str]]:
    """(command, its words' end on the clip's clock, when it was recognised on the recorder's clock, words said)
    for each command the chunks held, handled one increment at a time as they arrive."""
    received, committed, said, free_at, found = b"", 0.0, [], 0.0, []
    for chunk in chunks:
        received += chunk.data
        arrives = chunk.start + timeslice  # the recorder hands a chunk over when its timeslice ends
        began = time.perf_counter()
        final = chunk is chunks[-1]
        words, after = transcribe_increment(model, decode_pcm(received), committed_until=committed, final=final,
                                            context=" ".join(said[-CONTEXT_WORDS:]), hint=audio_commands.PROMPT)
        triples = [(w.text, w.start, w.end) for w in words]
        if not final:
            held = audio_commands.held_from(triples, after)
            if held is not None:
                after, triples = max(committed, triples[held][1] - 0.15), triples[:held]
        done = max(arrives, free_at) + (time.perf_counter() - began)
        free_at = done
        for command, positions in audio_commands.commands_in(triples):
            found.append((command, triples[positions[-1]][2], done, " ".join(triples[p][0] for p in positions)))
        said += [t[0] for t in triples]
        committed = after
    return found


def _ack_round_trip(repeat: int = 20) -> dict | None:
    """Seconds for the command path to store and acknowledge a pause command (annotation.services.command_submit,
    what the socket consumer calls before its ack), in a database of the bench's own (loupe_bench_voice, kept);
    None where no PostgreSQL answers."""
    try:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
        os.environ.setdefault("LOUPE_FAST_PASSWORD_HASHER", "1")
        import django

        django.setup()
        from django.conf import settings
        from django.db import connection

        settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = "loupe_bench_voice"
        connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=True, serialize=False)
        from annotation.services import command_submit
        from rollouts.models import Episode, EpisodeStatus
        from tests.factories import make_member, make_project, make_task, make_user
    except Exception as exc:  # noqa: BLE001 - no database: the figure is left out, and the report says why
        return {"error": str(exc)[:200]}
    project = make_project(f"bench voice {time.time():.0f}")
    user = make_user(f"voice-bench-{time.time_ns()}")
    make_member(project, user)
    task = make_task(project)
    seconds = []
    for i in range(repeat):
        episode = Episode.objects.create(project=project, task=task, seed=i, mode="supervised",
                                         status=EpisodeStatus.RUNNING, created_by=user)
        began = time.perf_counter()
        command_submit(episode_id=episode.pk, user=user, frame={"type": "pause", "id": f"voice-{i}"})
        seconds.append(time.perf_counter() - began)
    return {"median_s": round(statistics.median(seconds), 4), "max_s": round(max(seconds), 4), "n": repeat}


def voice_commands_report(timeslice: float = 1.0, rates: tuple[int, ...] = (140, 175)) -> dict:
    model = load_model()
    expected = [(i, c) for i, (_, c) in enumerate(SCRIPT) if c is not None]
    thoughts = [i for i, (_, c) in enumerate(SCRIPT) if c is None]
    errors, false_commands, latencies, reason_wers, misses = 0, 0, [], [], []
    with tempfile.TemporaryDirectory() as folder:
        for rate in rates:
            wav, spans = _session_wav(Path(folder), rate)
            chunks = audio_fixtures.split_like_media_recorder(
                audio_fixtures.encode_webm_opus(wav, cluster_ms=round(timeslice * 1000)), timeslice=timeslice)
            found = _recognised(model, chunks, timeslice)

            def part_of(end: float) -> int | None:
                return next((i for i, (s, e) in enumerate(spans) if s - 0.3 <= end <= e + PAUSE_S - 0.2), None)

            by_part: dict[int, tuple] = {}
            for command, end, at, words in found:
                part = part_of(end)
                if part is None or part in thoughts:
                    false_commands += 1
                    misses.append({"rate": rate, "heard": words, "as": command.type, "part": part})
                else:
                    by_part[part] = (command, at - spans[part][1], words)
            for part, want in expected:
                got = by_part.get(part)
                if got is None or (got[0].type, got[0].outcome) != (want.type, want.outcome):
                    errors += 1
                    misses.append({"rate": rate, "said": SCRIPT[part][0], "heard": got[2] if got else None})
                    continue
                latencies.append(got[1])
                if want.type == "reject":
                    reason_wers.append(word_error_rate(want.reason, got[0].reason))
    n = len(expected) * len(rates)
    ack = _ack_round_trip()
    to_event = _summary(latencies) if latencies else None
    return {
        "commands_spoken": n,
        "thoughts_spoken": len(thoughts) * len(rates),
        "errors": errors,
        "error_rate": round(errors / n, 4),
        "thoughts_taken_for_commands": false_commands,
        "reason_wer_mean": round(statistics.fmean(reason_wers), 4) if reason_wers else None,
        "misses": misses,
        "speaking_rates_wpm": list(rates),
        "chunk_s": timeslice,
        "end_of_command_to_event": to_event,
        "hold_s": HOLD_S,
        "command_store_and_ack": ack,
        "end_of_command_to_ack": None if to_event is None else {
            k: round(v + HOLD_S + ((ack or {}).get("median_s") or 0.0), 4) for k, v in to_event.items()},
        "note": "to_ack = to_event + the page's hold + the command path's store-and-ack; the socket's network time "
                "on loopback is not included",
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def _summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"mean_s": round(statistics.fmean(ordered), 4), "p50_s": round(ordered[len(ordered) // 2], 4),
            "p95_s": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4), "max_s": round(ordered[-1], 4)}
