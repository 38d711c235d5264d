"""Benchmark the think-aloud speech path on this machine and print one JSON object.

    .venv/bin/python bench/bench_audio.py [--repeat 2] [--runs 3] [--latency-repeat 2] [--no-latency]
    .venv/bin/python bench/bench_audio.py --commands   (voice steering: bench/bench_voice.py)

Reports the real-time factor of Whisper tiny.en int8 on the CPU (transcription seconds per
second of audio; the target is <= 0.1), the CPU time it used, and the latency of each increment
as MediaRecorder chunks arrive (`--timeslice`, 1 s as the page records them): decoding chunks 0..N,
then transcribe_increment. The speech
is espeak-ng reading the tests' known text `--repeat` times, so the word error rate is reported
too. The load average is included because the CPUs may be shared.

Then, end to end (`upload_to_socket`): a real daphne, an `audio` worker and a `rollouts` worker
running autonomous episodes back to back with the local tiny policy; the chunks are PUT through
the API at the pace a recorder makes them, and each transcribed word is timed from the upload of
the chunk that holds its end to its first showing on the episode's WebSocket, as a provisional
`transcript.interim` word or a committed `transcript.words` one (target p95 < 3 s); and from the
moment each word was said, first shown and committed (issue 22's goals: p95 < 1.5 s and < 4 s). Uses the
configured database (DATABASE_URL, else the embedded one).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from annotation.audio_stream import SAMPLE_RATE, check_chunk, decode_pcm  # noqa: E402
from annotation.speech import CONTEXT_WORDS, transcribe_increment, word_error_rate  # noqa: E402
from annotation.whisper_model import default_model_path, load_model  # noqa: E402
from tests.annotation import audio_fixtures  # noqa: E402


def _summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "mean_s": round(statistics.fmean(ordered), 4),
        "p50_s": round(ordered[len(ordered) // 2], 4),
        "p95_s": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4),
        "max_s": round(ordered[-1], 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2, help="how many times the known text is spoken")
    parser.add_argument("--runs", type=int, default=3, help="one-shot transcriptions to take the median of")
    parser.add_argument("--latency-repeat", type=int, default=2,
                        help="how many times the known text is spoken for the upload-to-socket latency")
    parser.add_argument("--no-latency", action="store_true", help="skip the end-to-end upload-to-socket latency")
    parser.add_argument("--timeslice", type=float, default=1.0,
                        help="seconds of audio a chunk holds, as the browser's recorder cuts them")
    parser.add_argument("--talkers", type=int, default=1,
                        help="people talking at once, each uploading the speech as their own clip (one audio worker)")
    parser.add_argument("--commands", action="store_true",
                        help="voice steering instead: the error rate and latency of spoken commands (bench_voice.py)")
    args = parser.parse_args()
    missing = audio_fixtures.missing_tools()
    if missing:
        print(json.dumps({"error": f"needs {' and '.join(missing)} on PATH"}))
        return 1
    if args.commands:
        from bench.bench_voice import voice_commands_report

        print(json.dumps({"voice_commands": voice_commands_report(timeslice=args.timeslice)}, indent=2))
        return 0

    text = " ".join([audio_fixtures.THINK_ALOUD_TEXT] * args.repeat)
    with tempfile.TemporaryDirectory() as folder:
        stream = audio_fixtures.encode_webm_opus(audio_fixtures.synthesize_wav(text, Path(folder) / "speech.wav"),
                                                 cluster_ms=round(args.timeslice * 1000))
    chunks = audio_fixtures.split_like_media_recorder(stream, timeslice=args.timeslice)

    began = time.perf_counter()
    model = load_model()
    load_s = time.perf_counter() - began

    began = time.perf_counter()
    pcm = decode_pcm(stream)
    decode_s = time.perf_counter() - began
    audio_s = len(pcm) / SAMPLE_RATE

    one_shot_s: list[float] = []
    one_shot_cpu_s: list[float] = []
    for _ in range(args.runs):
        began, began_cpu = time.perf_counter(), time.process_time()
        one_shot, _ = transcribe_increment(model, pcm, committed_until=0.0, final=True)
        one_shot_s.append(time.perf_counter() - began)
        one_shot_cpu_s.append(time.process_time() - began_cpu)
    transcribe_s = statistics.median(one_shot_s)

    check_s: list[float] = []
    for chunk in chunks:
        began = time.perf_counter()
        check_chunk(data=chunk.data, content_type="audio/webm;codecs=opus", max_bytes=1_000_000,
                    header=None if chunk.index == 0 else chunks[0].data)
        check_s.append(time.perf_counter() - began)

    decode_each: list[float] = []
    increment_each: list[float] = []
    received = b""
    committed = 0.0
    chunked_words = []
    increments_with_words = 0
    for chunk in chunks:
        received += chunk.data
        began = time.perf_counter()
        so_far = decode_pcm(received)
        decode_each.append(time.perf_counter() - began)
        began = time.perf_counter()
        words, committed = transcribe_increment(model, so_far, committed_until=committed,
                                                final=chunk is chunks[-1],
                                                context=" ".join(w.text for w in chunked_words[-CONTEXT_WORDS:]))
        increment_each.append(time.perf_counter() - began)
        chunked_words.extend(words)
        increments_with_words += bool(words)

    report = {
        "model": default_model_path(),
        "compute_type": "int8",
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "audio_s": round(audio_s, 2),
        "model_load_s": round(load_s, 3),
        "decode_whole_s": round(decode_s, 4),
        "one_shot_transcribe_s": round(transcribe_s, 3),
        "real_time_factor": round(transcribe_s / audio_s, 4),
        "real_time_factor_target": 0.1,
        # CPU seconds (all threads) per second of audio: less sensitive to other load than wall time.
        "cpu_seconds_per_audio_second": round(statistics.median(one_shot_cpu_s) / audio_s, 4),
        "wer_one_shot": round(word_error_rate(text, " ".join(w.text for w in one_shot)), 4),
        "wer_chunked": round(word_error_rate(text, " ".join(w.text for w in chunked_words)), 4),
        "chunks": len(chunks),
        "chunk_s": args.timeslice,
        "check_chunk": _summary(check_s),
        "decode_chunks_so_far": _summary(decode_each),
        "transcribe_increment": _summary(increment_each),
        "increments_with_words": increments_with_words,
    }
    if not args.no_latency:
        report["upload_to_socket"] = upload_to_socket_latency(args.latency_repeat, args.timeslice, args.talkers)
    print(json.dumps(report, indent=2))
    return 0


def _passes(log: Path) -> dict:
    """A profile of the audio worker's transcription passes, from its log."""
    marker = "transcription pass: "
    rows = [json.loads(line.split(marker, 1)[1]) for line in log.read_text(errors="replace").splitlines()
            if marker in line]
    if not rows:
        return {"passes": 0}
    out = {"passes": len(rows), "clips_mean": round(statistics.fmean(r["clips"] for r in rows), 2),
           "clips_max": max(r["clips"] for r in rows)}
    for part in ("decode_s", "whisper_s", "encoder", "decoder", "align", "store_s"):
        out[part] = _summary([r[part] for r in rows])
    return out


LATENCY_TARGET_P95_S = 3.0
SHOWN_TARGET_P95_S, COMMITTED_TARGET_P95_S = 1.5, 4.0  # issue 22: after the speech
CONTENT_TYPE = "audio/webm;codecs=opus"


class _Api:
    """The REST calls a browser makes, with a bearer token (urllib: nothing else to install)."""

    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token

    def call(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> dict:
        import urllib.request

        request = urllib.request.Request(self.base + path, data=body, method=method,
                                         headers={"Authorization": f"Bearer {self.token}", **(headers or {})})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read() or b"{}")

    def clip(self, episode_id: int, client_id: str, started_at: float) -> int:
        body = json.dumps({"client_id": client_id, "content_type": CONTENT_TYPE, "started_at": started_at}).encode()
        return self.call("POST", f"/api/v1/episodes/{episode_id}/audio/", body, {"Content-Type": "application/json"})["id"]

    def chunk(self, clip_id: int, index: int, data: bytes, start: float) -> None:
        self.call("PUT", f"/api/v1/audio/{clip_id}/chunks/{index}", data,
                  {"Content-Type": CONTENT_TYPE, "X-Chunk-Start": f"{start:.3f}"})

    def finish(self, clip_id: int) -> None:
        self.call("POST", f"/api/v1/audio/{clip_id}/finish")


def upload_to_socket_latency(repeat: int, timeslice: float = 1.0, talkers: int = 1) -> dict:
    """Latency from a chunk's upload to its words on the session's socket, while a rollout runs; ``talkers`` people
    talk at once (each their own clip), served by one audio worker process."""
    import threading

    from bench.django_setup import setup_django

    setup_django(channel_prefix=f"benchaudio{os.getpid()}")  # settings, and the database migrated
    import websocket
    from django.contrib.auth import get_user_model
    from django.db import connection

    from training import deployments
    from rollouts import episodes
    from rollouts.models import Checkpoint, Deployment, Episode, Step
    from projects.models import Membership, Project, TaskSpec
    from tests.stack import ProcessStack, stack_env, start_daphne, start_worker, wait_for
    from trainer.model import save_tiny_untrained
    from webapp.auth import token_create

    folder = Path(tempfile.mkdtemp(prefix="bench-audio-"))
    text = " ".join([audio_fixtures.THINK_ALOUD_TEXT] * repeat)
    chunks = audio_fixtures.split_like_media_recorder(
        audio_fixtures.encode_webm_opus(audio_fixtures.synthesize_wav(text, folder / "speech.wav"),
                                        cluster_ms=round(timeslice * 1000)),
        timeslice=timeslice)
    warm_chunks = audio_fixtures.split_like_media_recorder(audio_fixtures.encode_webm_opus(
        audio_fixtures.synthesize_wav("Warming up the model first.", folder / "warm.wav")))

    user, _ = get_user_model().objects.get_or_create(username="bench-thinker")
    project, _ = Project.objects.get_or_create(slug="bench-think-aloud", defaults={"name": "Bench think-aloud"})
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": "annotator"})
    task, _ = TaskSpec.objects.get_or_create(project=project, task_name="click-button", split="train")
    if not Deployment.objects.filter(project=project, active=True).exists():
        checkpoint = Checkpoint.objects.create(project=project, name="bench-tiny",
                                               uri=str(save_tiny_untrained(folder / "tiny")))
        deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="local", reason="bench")
    _, token = token_create(user=user, name="bench-audio")
    listened = Episode.objects.create(project=project, task=task, seed=0, mode="supervised")

    stack = ProcessStack([], [])
    stop = threading.Event()
    events: list[tuple[float, dict]] = []
    interims: list[tuple[float, dict]] = []
    rollouts: list[int] = []

    def keep_rolling_out():
        """Autonomous episodes with the local tiny policy, one always queued behind the running one."""
        seed = 0
        try:
            while not stop.is_set():
                live = Episode.objects.filter(project=project, mode="autonomous", status__in=["queued", "running"])
                if live.count() < 2:
                    seed += 1
                    rollouts.extend(e.pk for e in episodes.episodes_start(
                        project=project, task=task, seeds=[seed % 1000], mode="autonomous", actor=user))
                stop.wait(0.5)
        finally:
            connection.close()

    def listen(ws):
        while not stop.is_set():
            try:
                message = json.loads(ws.recv())
            except websocket.WebSocketTimeoutException:
                continue
            except Exception:  # noqa: BLE001 - the socket closed at the end
                return
            if message.get("type") == "transcript.words":
                events.append((time.time(), message["data"]))
            elif message.get("type") == "transcript.interim":
                interims.append((time.time(), message["data"]))

    roller = threading.Thread(target=keep_rolling_out, daemon=True)
    try:
        env = stack_env()
        base = start_daphne(stack, folder, env)
        start_worker(stack, folder, env, queues="audio", name="audio")
        start_worker(stack, folder, env, queues="live,rollouts", name="rollouts")
        roller.start()
        wait_for(lambda: Episode.objects.filter(project=project, mode="autonomous", status="running").exists(), 180,
                 what="a rollout to be running")
        ws = websocket.create_connection(f"ws://{base.removeprefix('http://')}/ws/episodes/{listened.pk}/",
                                         header=[f"Authorization: Bearer {token}"], suppress_origin=True, timeout=1)
        listener = threading.Thread(target=listen, args=(ws,), daemon=True)
        listener.start()
        api = _Api(base, token)

        # The audio worker loads Whisper on its first clip: not part of the latency.
        warm = api.clip(listened.pk, f"warm-{os.getpid()}", time.time())
        for chunk in warm_chunks:
            api.chunk(warm, chunk.index, chunk.data, time.time())
        api.finish(warm)
        wait_for(lambda: any(data["clip"] == warm for _, data in events), 180, interval=0.2, what="the warm-up words")

        steps_before = Step.objects.filter(episode_id__in=rollouts).count()
        origin = time.time()
        clips = [api.clip(listened.pk, f"bench-{os.getpid()}-{n}", origin) for n in range(talkers)]
        uploaded: dict[int, list[float]] = {clip: [] for clip in clips}
        ends = [c.start for c in chunks[1:]] + [chunks[-1].start + timeslice]
        for chunk, end in zip(chunks, ends):
            time.sleep(max(0.0, origin + end - time.time()))  # a recorder hands a chunk over when its slice ends
            for clip in clips:  # everyone talking at once
                api.chunk(clip, chunk.index, chunk.data, origin + chunk.start)
                uploaded[clip].append(time.time())
        for clip in clips:
            api.finish(clip)

        def settled():
            last = [max((t for t, data in events if data["clip"] == clip), default=None) for clip in clips]
            return (None not in last and time.time() - max(last) > 8
                    and time.time() - max(u[-1] for u in uploaded.values()) > 10)
        wait_for(settled, 300, interval=0.5, what="the last words")
        steps_during = Step.objects.filter(episode_id__in=rollouts).count() - steps_before
    finally:
        stop.set()
        stack.stop()
        roller.join(timeout=10)
        Episode.objects.filter(pk__in=[*rollouts, listened.pk]).delete()

    passes = _passes(folder / "audio.log")

    def holder(moment: float) -> int:
        """The chunk that holds a moment of the clip (session seconds)."""
        return max(i for i, c in enumerate(chunks) if c.start <= max(0.0, moment - origin - 1e-3))

    word_latency, shown_latency, commit_latency, shown_after_speech, committed_after_speech = [], [], [], [], []
    wers, interim_messages, batches = [], 0, 0
    for clip in clips:
        mine = [(received, data["words"]) for received, data in events if data["clip"] == clip and data["words"]]
        if not mine:
            return {"error": f"no words of clip {clip} reached the socket"}
        provisional = [(received, data["words"]) for received, data in interims if data["clip"] == clip]
        interim_messages += len(provisional)
        batches += len(mine)

        def first_shown(word: dict, committed_at: float) -> float:
            """When a word first reached the socket: as a provisional word at about its time, or committed."""
            same = word["word"].strip(".,?!").lower()
            return min([committed_at] + [received for received, batch in provisional if any(
                w["word"].strip(".,?!").lower() == same and abs(w["start"] - word["start"]) < 0.6 for w in batch)])

        words = []
        for n, (received, batch) in enumerate(mine):
            words.extend(w["word"] for w in batch)
            # Its own chunk: a word cannot come before the chunk holding its end is uploaded.
            word_latency.extend(received - uploaded[clip][holder(w["end"])] for w in batch)
            shown_latency.extend(first_shown(w, received) - uploaded[clip][holder(w["end"])] for w in batch)
            # from the moment the word was said (its end, on the session clock) to the screen: what a person feels
            shown_after_speech.extend(first_shown(w, received) - w["end"] for w in batch)
            committed_after_speech.extend(received - w["end"] for w in batch)
            # The chunk that made the batch committable: the server commits up to a settled pause, which
            # it sees once the next speech begins or 0.8 s of silence follows (annotation/speech.py).
            following = mine[n + 1][1][0]["start"] if n + 1 < len(mine) else float("inf")
            needed = min(len(chunks) - 1, holder(min(following, batch[-1]["end"] + 0.8)))
            commit_latency.append(received - uploaded[clip][needed])
        wers.append(word_error_rate(text, " ".join(words)))
    summary = _summary(shown_latency)
    shown_spoken, committed_spoken = _summary(shown_after_speech), _summary(committed_after_speech)
    return {
        "talkers": talkers,
        "chunks": len(chunks),
        "chunk_s": timeslice,
        "audio_s": round(ends[-1], 1),
        "words": len(shown_latency),
        "wer": round(max(wers), 4),  # the worst talker's
        # from the upload of the chunk holding each word's end to the word first on the socket, as a
        # provisional (`transcript.interim`) word where one came first, else committed: what a person sees
        "shown_latency": summary,
        # the same, to the committed (stored) word
        "word_latency": _summary(word_latency),
        "interim_messages": interim_messages,
        "p95_s": summary["p95_s"],
        "target_p95_s": LATENCY_TARGET_P95_S,
        "meets_target": summary["p95_s"] < LATENCY_TARGET_P95_S,
        # from the upload of the chunk that let a batch be committed (the pause after it) to the socket:
        # the server's own processing, without the wait for the speaker to pause
        "commit_latency": _summary(commit_latency),
        # the goals, from the speech: a word's end to its first showing, and to its committed showing
        "shown_after_speech": shown_spoken,
        "shown_after_speech_target_p95_s": SHOWN_TARGET_P95_S,
        "committed_after_speech": committed_spoken,
        "committed_after_speech_target_p95_s": COMMITTED_TARGET_P95_S,
        "meets_speech_targets": (shown_spoken["p95_s"] < SHOWN_TARGET_P95_S
                                 and committed_spoken["p95_s"] < COMMITTED_TARGET_P95_S),
        "events": batches,
        # the audio worker's Whisper passes (annotation/audio.py logs each): how many clips each read, and where its
        # time went (decoding the chunks, the whole Whisper call and its encoder, decoder and word alignment, storing)
        "passes": passes,
        "rollout": "autonomous episodes back to back, local tiny policy on the CPU",
        "rollout_steps_during": steps_during,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    sys.exit(main())
