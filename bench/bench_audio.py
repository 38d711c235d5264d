"""Benchmark the think-aloud speech path on this machine and print one JSON object.

    .venv/bin/python bench/bench_audio.py [--repeat 2] [--runs 3]

Reports the real-time factor of Whisper tiny.en int8 on the CPU (transcription seconds per
second of audio; the target is <= 0.1), the CPU time it used, and the latency of each increment
as 2 s MediaRecorder chunks arrive: decoding chunks 0..N, then transcribe_increment. The speech
is espeak-ng reading the tests' known text `--repeat` times, so the word error rate is reported
too. The load average is included because the CPUs may be shared.
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

from annotation.speech import (  # noqa: E402
    SAMPLE_RATE,
    check_chunk,
    decode_pcm,
    default_model_path,
    load_model,
    transcribe_increment,
    word_error_rate,
)
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
    args = parser.parse_args()
    missing = audio_fixtures.missing_tools()
    if missing:
        print(json.dumps({"error": f"needs {' and '.join(missing)} on PATH"}))
        return 1

    text = " ".join([audio_fixtures.THINK_ALOUD_TEXT] * args.repeat)
    with tempfile.TemporaryDirectory() as folder:
        stream = audio_fixtures.encode_webm_opus(audio_fixtures.synthesize_wav(text, Path(folder) / "speech.wav"))
    chunks = audio_fixtures.split_like_media_recorder(stream)

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
                                                final=chunk is chunks[-1])
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
        "chunk_s": 2.0,
        "check_chunk": _summary(check_s),
        "decode_chunks_so_far": _summary(decode_each),
        "transcribe_increment": _summary(increment_each),
        "increments_with_words": increments_with_words,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
