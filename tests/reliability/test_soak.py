"""`make soak`: live episodes for a long time on this machine, with watchers and think-aloud uploads.

LOUPE_SOAK_EPISODES (20) supervised episodes are live at any moment, each steered at a person's pace
(a proposal approved two seconds after it appears) and watched by a second socket; a new episode starts
as soon as one ends. LOUPE_SOAK_TALKERS (4) of them at a time carry a think-aloud recording, uploaded
chunk by chunk as MediaRecorder would and transcribed by the audio worker. After LOUPE_SOAK_SECONDS
(600) nothing new starts and the live ones are let finish.

Stated bound: after the warm-up (the first fifth of the run, when every worker process has started its
browser), no service's memory (resident set of the process and its children, browsers included) ends
more than 20% + 64 MB above its warm-up level. And nothing is lost or doubled: each socket received every
stored event of its episode up to the end, once, in order; every acknowledged approval and every
acknowledged audio chunk is stored exactly once. The report (JSON, and memory over time as an SVG chart)
is written to test-artifacts/soak/.
"""
from __future__ import annotations

import json
import os
import threading
import time

import pytest

from rollouts import episodes
from rollouts.models import Episode, Event
from tests.reliability.live import Watcher, assert_acked_commands_stored_once, scripted_project, wait_episodes_end
from tests.stack import ROOT, ProcessStack, stack_env, start_daphne, start_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.soak, pytest.mark.browser]

SECONDS = float(os.environ.get("LOUPE_SOAK_SECONDS", "600"))
LIVE = int(os.environ.get("LOUPE_SOAK_EPISODES", "20"))
TALKERS = int(os.environ.get("LOUPE_SOAK_TALKERS", "4"))
GROWTH_FACTOR, GROWTH_MB = 1.2, 64
REPORT = ROOT / "test-artifacts" / "soak"


def rss_mb(pid: int) -> float:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total / 2**20


class Talker:
    """One think-aloud recording on one episode: a chunk every two seconds, then finish."""

    def __init__(self, client, episode_id: int, chunks, n: int):
        self.client, self.chunks, self.next = client, chunks, 0
        self.origin = time.time()
        response = client.post(f"/api/v1/episodes/{episode_id}/audio/", {
            "client_id": f"soak-{n}", "content_type": "audio/webm", "started_at": self.origin}, format="json")
        assert response.status_code == 201, response.content
        self.clip_id = response.json()["id"]
        self.acked = 0
        self.due = time.monotonic()

    def tick(self) -> bool:
        """Upload what is due; False once the clip is finished."""
        if time.monotonic() < self.due:
            return True
        if self.next == len(self.chunks):
            assert self.client.post(f"/api/v1/audio/{self.clip_id}/finish").status_code == 202
            return False
        chunk = self.chunks[self.next]
        response = self.client.generic("PUT", f"/api/v1/audio/{self.clip_id}/chunks/{chunk.index}", chunk.data,
                                       content_type="audio/webm", HTTP_X_CHUNK_START=str(self.origin + chunk.start))
        if response.status_code in (200, 201):
            self.acked += 1
            self.next += 1
        self.due = time.monotonic() + 2.0
        return True


@pytest.mark.timeout(SECONDS + 1500)
def test_soak_live_episodes_with_watchers_and_think_aloud(tmp_path):
    from rest_framework.test import APIClient

    from annotation.models import AudioChunk, AudioClip
    from bench.chart import line_chart_svg
    from tests.annotation.audio_fixtures import (THINK_ALOUD_TEXT, encode_webm_opus, missing_tools,
                                                 split_like_media_recorder, synthesize_wav)

    if missing_tools():
        pytest.skip(f"needs {missing_tools()}")
    chunks = split_like_media_recorder(encode_webm_opus(synthesize_wav(THINK_ALOUD_TEXT, tmp_path / "speech.wav")))
    project, task, users, tokens = scripted_project("login-user", max_steps=8)
    client = APIClient()
    client.force_authenticate(users[0])
    stack = ProcessStack([], [])
    samples: dict[str, list[tuple[float, float]]] = {}
    stop_sampling = threading.Event()
    done: list[tuple[int, list[Watcher]]] = []
    live: dict[int, list[Watcher]] = {}
    talkers: dict[int, Talker] = {}
    clips: list[Talker] = []
    talked: set[int] = set()
    closing: list[tuple[float, list[Watcher]]] = []
    next_progress = time.monotonic() + 60
    started = time.monotonic()
    try:
        base = start_daphne(stack, tmp_path, stack_env(), name="daphne-soak")
        services_pids = {"daphne": stack.processes[-1].pid}
        half = max(1, LIVE // 2)
        for n in (1, 2):
            services_pids[f"rollouts-{n}"] = start_worker(stack, tmp_path, stack_env(), queues="live,rollouts",
                                                          name=f"rollouts-soak-{n}", concurrency=half).pid
        services_pids["audio"] = start_worker(stack, tmp_path, stack_env(), queues="audio", name="audio-soak").pid

        def sample():
            while not stop_sampling.wait(5.0):
                at = time.monotonic() - started
                for name, pid in services_pids.items():
                    samples.setdefault(name, []).append((at, rss_mb(pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        seed = 0
        while time.monotonic() - started < SECONDS:
            while len(live) < LIVE:
                seed += 1
                episode_id = episodes.episodes_start(project=project, task=task, seeds=[seed], mode="supervised",
                                                     actor=users[0])[0].pk
                live[episode_id] = [Watcher(base, episode_id, tokens[0], approve=True, approve_after=2.0,
                                            name=f"steer-{episode_id}"),
                                    Watcher(base, episode_id, tokens[1], name=f"watch-{episode_id}")]
            for episode_id in list(live):
                if len(talkers) < TALKERS and episode_id not in talked:  # one recording an episode
                    talked.add(episode_id)
                    talkers[episode_id] = Talker(client, episode_id, chunks, len(clips))
                    clips.append(talkers[episode_id])
            for episode_id, talker in list(talkers.items()):
                if not talker.tick():
                    del talkers[episode_id]
            ended = set(Episode.objects.filter(pk__in=list(live), status__in=["finished", "failed", "interrupted"])
                        .values_list("pk", flat=True))
            for episode_id in ended:
                done.append((episode_id, live.pop(episode_id)))
                closing.append((time.monotonic(), done[-1][1]))
            while closing and (all(w.finished.is_set() for w in closing[0][1]) or
                               time.monotonic() - closing[0][0] > 60):  # their sockets are let go once finished
                for w in closing.pop(0)[1]:
                    w.close()
            if time.monotonic() > next_progress:
                next_progress += 60
                print(f"soak {time.monotonic() - started:.0f} s: {len(done)} episodes done, {len(live)} live, "
                      f"{len(clips)} clips, memory {({k: round(v[-1][1]) for k, v in samples.items()})}", flush=True)
            time.sleep(0.2)
        while talkers:  # let the recordings in progress finish
            for episode_id, talker in list(talkers.items()):
                if not talker.tick():
                    del talkers[episode_id]
            time.sleep(0.2)
        wait_episodes_end(list(live), 600)
        for episode_id, watchers in live.items():
            for w in watchers:
                w.finished.wait(60)
                w.close()
            done.append((episode_id, watchers))
        stop_sampling.set()
        sampler.join(10)
    finally:
        stop_sampling.set()
        for _, watchers in done:
            for w in watchers:
                w.close()
        for watchers in live.values():
            for w in watchers:
                w.close()
        logs = stack.tail(60)
        stack.stop()

    # --- nothing lost, nothing doubled ---
    problems = []
    for episode_id, watchers in done:
        stored = [{"type": e.type, "seq": e.seq, "data": e.payload}
                  for e in Event.objects.filter(episode_id=episode_id).order_by("seq")]
        finished_at = max(e["seq"] for e in stored if e["type"] == "episode.finished" or (
            e["type"] == "episode.state" and e["data"].get("status") in ("finished", "failed", "interrupted")))
        for w in watchers:
            got = [{"type": e["type"], "seq": e["seq"], "data": e["data"]} for e in w.events]
            if w.problems or got != stored[:len(got)] or len(got) < finished_at:
                problems.append(f"{w.name}: {w.problems or 'another log than the stored one'} "
                                f"({len(got)} events, finished at seq {finished_at})")
    statuses = {s: Episode.objects.filter(project=project, status=s).count() for s in ("finished", "failed",
                                                                                        "interrupted")}
    unfinished = {e.pk: f"{e.status}: {e.end_reason}" for e in Episode.objects.filter(project=project)
                  .exclude(status="finished")}
    approvals = assert_acked_commands_stored_once([w for _, ws in done for w in ws])
    for talker in clips:
        stored_chunks = AudioChunk.objects.filter(clip_id=talker.clip_id).count()
        if stored_chunks != talker.acked:
            problems.append(f"clip {talker.clip_id}: {talker.acked} chunks acknowledged, {stored_chunks} stored")
    transcribed = sum(AudioClip.objects.get(pk=t.clip_id).transcribed_chunks for t in clips)

    # --- memory ---
    warm_until = SECONDS / 5
    memory = {}
    for name, series in samples.items():
        warm = [mb for at, mb in series if at <= warm_until + 10 and at >= warm_until - 10] or [series[0][1]]
        warm_mb, end_mb = max(warm), series[-1][1]
        bound = warm_mb * GROWTH_FACTOR + GROWTH_MB
        memory[name] = {"warm_mb": round(warm_mb, 1), "end_mb": round(end_mb, 1), "peak_mb": round(max(
            mb for _, mb in series), 1), "bound_mb": round(bound, 1)}
        if end_mb > bound:
            problems.append(f"{name} grew from {warm_mb:.0f} MB to {end_mb:.0f} MB (bound {bound:.0f} MB)")
    report = {"seconds": SECONDS, "live_episodes": LIVE, "talkers": TALKERS, "episodes": len(done),
              "statuses": statuses, "not_finished": unfinished, "approvals": approvals, "clips": len(clips),
              "chunks": sum(t.acked for t in clips), "transcribed_chunks": transcribed,
              "events_checked": sum(len(w.events) for _, ws in done for w in ws), "memory": memory,
              "bound": f"end <= warm-up x {GROWTH_FACTOR} + {GROWTH_MB} MB per service", "problems": problems}
    REPORT.mkdir(parents=True, exist_ok=True)
    (REPORT / "report.json").write_text(json.dumps(report, indent=2))
    (REPORT / "memory.svg").write_text(line_chart_svg(
        samples, title=f"Soak: {LIVE} live episodes, {TALKERS} think-aloud, {SECONDS:.0f} s — memory per service",
        x_label="seconds", y_label="resident MB (process and children)"))
    print(json.dumps(report, indent=2))
    assert statuses["finished"] == len(done) and len(done) >= LIVE, (report, logs)
    assert not problems, json.dumps(report, indent=2)
