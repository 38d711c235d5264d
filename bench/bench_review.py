"""Review at scale: 100,000 episodes and 2,000,000 steps generated in a database of its own
(`loupe_bench_review`, kept between runs so the data is made once). Measures the filtered review
list API p95, the replay page's data API p95 for a 50-step episode, and snapshot build and export
throughput in rows per second with the export's peak memory. The snapshot is built with every row rendered (as
before stored rows: ``snapshot_build(stored=False)``) in one process and in two, then as a first freeze (rendering
and storing each episode's rows, snapshots/stored_rows.py) in two, then from the stored rows in one process and in
two (snapshots/build.py splits a build by episode ranges); every hash must be equal. A smaller one built from
stored rows in two processes, against the larger, projects a million-episode project's freeze. Last, a minute of
rendering ahead (snapshots/render_ahead.py: what each finished episode costs the `default` worker so that a freeze
finds its rows stored). Prints JSON.

`LOUPE_BENCH_EPISODES` / `LOUPE_BENCH_STEPS_PER_EPISODE` scale it down for a quick look."""
from __future__ import annotations

import json
import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("LOUPE_FAST_PASSWORD_HASHER", "1")

import django  # noqa: E402

django.setup()

from bench.stats import percentile  # noqa: E402

from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402

EPISODES = int(os.environ.get("LOUPE_BENCH_EPISODES", "100000"))
STEPS_PER_EPISODE = int(os.environ.get("LOUPE_BENCH_STEPS_PER_EPISODE", "20"))
SAMPLES = 40
# v2: each step's thought is its own (the same text in every step made redaction's memory unrealistically good)
DB_NAME = f"loupe_bench_review_{EPISODES}x{STEPS_PER_EPISODE}_v2"


def use_bench_database() -> None:
    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = DB_NAME
    # serialize=False: the default dumps the whole kept database into memory first (4 GB and minutes at 2 M steps)
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=True, serialize=False)


def generate(project, tasks, checkpoint, annotator) -> float:
    """Episodes and steps straight in SQL (the ORM would take an hour); returns seconds taken."""
    from rollouts.models import Episode

    if Episode.objects.filter(project=project).count() >= EPISODES:
        return 0.0  # made by an earlier run (in one transaction, so it is whole)
    started = time.monotonic()
    task_ids = [t.pk for t in tasks]
    prompt = json.dumps([{"role": "system", "content": "sys"}, {"role": "user", "content": "Instruction: click OK"}])
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("""
            INSERT INTO flywheel_episode (project_id, task_id, seed, checkpoint_id, mode, status, outcome, end_reason,
                comment, env_reward, review_summary, review_status, created_by_id, human_control, screen_width,
                screen_height, n_steps, n_interventions, n_void, last_seq, worker, attempt, created_at, finished_at)
            SELECT %(project)s, (%(tasks)s::bigint[])[1 + i %% array_length(%(tasks)s::bigint[], 1)], i, %(checkpoint)s,
                CASE WHEN i %% 5 = 0 THEN 'supervised' ELSE 'autonomous' END,
                CASE WHEN i %% 50 = 0 THEN 'failed' ELSE 'finished' END, '', 'done', '',
                CASE WHEN i %% 3 = 0 THEN 0.0 ELSE 1.0 END, '{}',
                (ARRAY['unreviewed','unreviewed','accepted','rejected','disputed'])[1 + i %% 5],
                CASE WHEN i %% 5 = 0 THEN %(annotator)s END, false, 160, 210, %(steps)s,
                CASE WHEN i %% 5 = 0 THEN 2 ELSE 0 END, CASE WHEN i %% 7 = 0 THEN 1 ELSE 0 END, 0, '', 0,
                now() - (i || ' minutes')::interval, now() - (i || ' minutes')::interval
            FROM generate_series(1, %(n)s) AS i""",
                    {"project": project.pk, "tasks": task_ids, "checkpoint": checkpoint.pk, "annotator": annotator.pk,
                     "steps": STEPS_PER_EPISODE, "n": EPISODES})
        cur.execute("""
            INSERT INTO flywheel_step (episode_id, index, screenshot, width, height, url, instruction, elements, prompt,
                raw_output, token_ids, token_logprobs, thought, action, action_text, actor, proposal, correction, reward,
                done, void, void_reason, human_thought, info, timings, checkpoint_id, created_at)
            SELECT e.id, s, '', 160, 210, '/miniwob/click-button.html', 'Click OK', '[]', %(prompt)s,
                'Thought: the OK button of ' || e.id || ' at ' || s || '\nAction: click(x=80, y=100)', '[1,2,3]',
                '[-0.1,-0.2,-0.3]', 'the OK button of ' || e.id || ' at ' || s,
                '{"name": "click", "args": {"x": 80, "y": 100}}', 'click(x=80, y=100)',
                CASE WHEN e.n_interventions > 0 AND s < 2 THEN 'edited' ELSE 'model' END,
                CASE WHEN e.n_interventions > 0 AND s < 2
                     THEN '{"thought": "cancel", "action": {"name": "click", "args": {"x": 5, "y": 5}}, "raw": "Thought: cancel\\nAction: click(x=5, y=5)"}'::jsonb END,
                CASE WHEN e.n_interventions > 0 AND s < 2 THEN 'action' ELSE '' END,
                0.0, s = %(last)s, false, '', '', '{}', '{}', e.checkpoint_id, e.created_at
            FROM flywheel_episode e CROSS JOIN generate_series(0, %(last)s) AS s
            WHERE e.project_id = %(project)s""", {"prompt": prompt, "last": STEPS_PER_EPISODE - 1, "project": project.pk})
    with connection.cursor() as cur:
        cur.execute("ANALYZE flywheel_episode; ANALYZE flywheel_step;")
    return round(time.monotonic() - started, 1)


def timed(client, url: str, n: int = SAMPLES) -> dict:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.get(url)
        samples.append(time.perf_counter() - started)
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return {"p50_ms": percentile(samples, .5), "p95_ms": percentile(samples, .95)}


def main() -> None:
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from core import redaction
    from rollouts import episodes
    from rollouts import steps
    from snapshots import build as snapshots
    from snapshots import export
    from snapshots.buckets import bucket_episodes
    from rollouts.models import Checkpoint, Episode
    from projects.models import Membership, Project, TaskSpec

    use_bench_database()
    project, _ = Project.objects.get_or_create(slug="bench-review", defaults={"name": "Bench review"})
    manager, _ = get_user_model().objects.get_or_create(username="bench-manager")
    annotator, _ = get_user_model().objects.get_or_create(username="bench-annotator")
    Membership.objects.get_or_create(project=project, user=manager, defaults={"role": "manager"})
    tasks = [TaskSpec.objects.get_or_create(project=project, task_name=name, split="train")[0]
             for name in ("click-button", "click-link", "focus-text", "enter-text")]
    checkpoint, _ = Checkpoint.objects.get_or_create(project=project, name="bench", defaults={"uri": "/dev/null"})
    generated_s = generate(project, tasks, checkpoint, annotator)

    client = APIClient()
    client.force_authenticate(manager)
    base = f"/api/v1/episodes/?project={project.pk}"
    lists = {
        "default": f"{base}&status=finished&review_status=unreviewed",
        "task": f"{base}&task={tasks[2].pk}",
        "void_with_interventions": f"{base}&has_void=true&has_interventions=true",
        "reward_and_date": f"{base}&reward_min=0.5&created_after=2000-01-01",
        "annotator": f"{base}&annotator={annotator.pk}&review_status=accepted",
        "by_steps": f"{base}&ordering=-n_steps",
    }
    first = client.get(lists["default"]).json()
    lists["page_2"] = first["next"]
    list_results = {name: timed(client, url) for name, url in lists.items()}

    replay_episode = Episode.objects.filter(project=project, n_steps=50).first()
    if replay_episode is None:
        replay_episode = Episode.objects.create(project=project, task=tasks[0], seed=1, status="running")
        for index in range(50):
            steps.step_record(
                episode=replay_episode, index=index, screenshot=b"", width=160, height=210, url="/x", instruction="Click",
                elements=[], prompt=[], raw_output="", token_ids=[], token_logprobs=[], thought="t",
                action={"name": "click", "args": {"x": 1, "y": 2}}, action_text="click(x=1, y=2)", actor="model",
                proposal=None, reward=0.0, done=False, void_reason=None, info={}, timings={})
        episodes.episode_finish(episode_id=replay_episode.pk, status="finished", end_reason="done", reward=1.0)
    replay = {"detail": timed(client, f"/api/v1/episodes/{replay_episode.pk}/"),
              "transcript": timed(client, f"/api/v1/episodes/{replay_episode.pk}/transcript")}

    # Snapshots of one task's accepted-by-reward episodes, then the export of one streamed to nowhere. An earlier
    # snapshot of the same rows would be returned as it is (freezing the same data twice makes one): drop it first.
    from django.db.models import Sum

    from snapshots.models import DatasetSnapshot, RenderedRows
    from snapshots.render_ahead import render_ahead

    def build(filter_: dict, processes: int, stored: bool = True) -> tuple[object, float]:
        DatasetSnapshot.objects.filter(project=project).delete()
        redaction._text_redact_remembered.cache_clear()  # each build starts as a fresh worker's would
        made = snapshots.snapshot_create(project=project, kind="sft", filter=filter_, build=False)
        started = time.monotonic()
        made = snapshots.snapshot_build(snapshot_id=made.pk, processes=processes, stored=stored)
        assert made.status == "ready", made.error
        return made, time.monotonic() - started

    one_task = {"tasks": [tasks[1].pk]}
    load_before_builds = round(os.getloadavg()[0], 2)
    RenderedRows.objects.all().delete()  # no episode's rows stored yet: the first freeze renders them all
    rendered_1, rendered_1_s = build(one_task, 1, stored=False)
    rendered_2, rendered_2_s = build(one_task, 2, stored=False)
    first, first_s = build(one_task, 2)
    with connection.cursor() as cur:
        # what the stored rows take, compressed (the table's size would count the rows the builds above replaced)
        cur.execute("SELECT sum(pg_column_size(jsonl) + pg_column_size(parquet)) FROM snapshots_renderedrows")
        stored_bytes = cur.fetchone()[0]
    small, small_s = build({**one_task, "mode": "supervised"}, 2)
    snapshot_1, build_1_s = build(one_task, 1)
    snapshot, build_s = build(one_task, 2)
    hashes = {built.sha256 for built in (rendered_1, rendered_2, first, snapshot_1, snapshot)}
    assert len(hashes) == 1, "a build made other bytes than another of the same rows"
    # cost = fixed + per row: from the two sizes built in two processes, for a freeze of every task's episodes of
    # a 1,000,000-episode project of the same shape
    per_row = (build_s - small_s) / (snapshot.rows - small.rows)
    fixed = max(0.0, build_s - per_row * snapshot.rows)
    sft_share = bucket_episodes(project, "sft").count() / Episode.objects.filter(project=project).count()
    million_rows = round(snapshot.rows / snapshot.episodes * 1_000_000 * sft_share)
    tracemalloc.start()
    started = time.monotonic()
    exported = sum(len(piece) for piece in export.export_stream(snapshot))
    export_s = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # Rendering ahead (snapshots/render_ahead.py): what each finished episode then costs the `default` worker, so
    # that a freeze finds its rows stored (the builds from stored rows above); a minute of it, from no rows stored
    RenderedRows.objects.all().delete()
    settings.LOUPE_RENDER_AHEAD_KINDS = "sft"
    started = time.monotonic()
    ahead_episodes = render_ahead(project.pk, seconds=60)["sft"]
    ahead_s = time.monotonic() - started
    ahead_rows = RenderedRows.objects.aggregate(rows=Sum("rows"))["rows"] or 0

    print(json.dumps({
        "load_average_1m": round(os.getloadavg()[0], 2), "load_average_1m_before_builds": load_before_builds,
        "episodes": Episode.objects.filter(project=project).count(), "steps_per_episode": STEPS_PER_EPISODE,
        "generated_s": generated_s,
        "list_api": list_results, "list_p95_ms_worst": max(r["p95_ms"] for r in list_results.values()),
        "list_target_p95_ms": 100,
        "replay_api_50_steps": replay,
        "snapshot": {"rows": snapshot.rows, "episodes": snapshot.episodes, "bytes": snapshot.size_bytes,
                     "rendered": {"build_1_process_s": round(rendered_1_s, 1),
                                  "build_1_process_rows_per_s": round(snapshot.rows / rendered_1_s),
                                  "build_2_processes_s": round(rendered_2_s, 1),
                                  "build_2_processes_rows_per_s": round(snapshot.rows / rendered_2_s)},
                     "rendered_ahead": {"episodes": ahead_episodes, "rows": ahead_rows, "seconds": round(ahead_s, 1),
                                        "rows_per_s": round(ahead_rows / ahead_s),
                                        "ms_an_episode": round(1000 * ahead_s / max(1, ahead_episodes), 2)},
                     "first_freeze": {"build_2_processes_s": round(first_s, 1),
                                      "build_2_processes_rows_per_s": round(snapshot.rows / first_s),
                                      "stored_mb": round(stored_bytes / 2**20, 1)},
                     "build_1_process_s": round(build_1_s, 1), "build_1_process_rows_per_s": round(snapshot.rows / build_1_s),
                     "build_2_processes_s": round(build_s, 1), "build_2_processes_rows_per_s": round(snapshot.rows / build_s),
                     "same_sha256": len(hashes) == 1,
                     "smaller": {"rows": small.rows, "build_2_processes_s": round(small_s, 1)},
                     "projection_1m_episodes": {"rows": million_rows, "minutes_2_processes":
                                                round((fixed + per_row * million_rows) / 60, 1)},
                     "build_target_rows_per_s": 20_000},
        "export": {"bytes": exported, "seconds": round(export_s, 2), "rows_per_s": round(snapshot.rows / export_s),
                   "peak_python_mb": round(peak / 2**20, 1),
                   "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)},
    }))


if __name__ == "__main__":
    main()
