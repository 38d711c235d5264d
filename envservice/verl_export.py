"""A project's tasks, and its RL snapshots, as the parquet rows verl's RLHFDataset reads.

Task rows: one a (task, seed), for the Loupe agent loop (trainer/launch/verl/agent_loop.py) to play through the
environment service: ``prompt`` (the system prompt of the checkpoint's style and the ask; the loop adds the first
screen), ``data_source`` (``loupe:<task>``), ``ability``, ``reward_model`` (rule: the env's own reward, which the
loop sets), ``extra_info`` (project, task, seed, split, env kind, the format and prompt style the model answers
in) and ``agent_name`` (``loupe_agent``). The train split's tasks go to train.parquet, the eval split's to
val.parquet.

RL snapshot rows (step rows: a prompt and how an answer is scored) keep their messages as ``prompt`` and their
reward spec, as JSON, in ``reward_model.ground_truth``, for a reward function that scores single answers."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from django.core.files.storage import default_storage

from agent.prompt import system_prompt
from core.errors import ApplicationError
from snapshots.models import DatasetSnapshot, SnapshotKind, SnapshotStatus
from projects.models import Split, TaskSpec

AGENT = "loupe_agent"
ASK = "Do the task on the screen ({task}). Answer with one action a turn."  # the loop adds the first screen


def task_rows(*, project_id: int, seeds_per_task: int, action_format: str = "loupe",
              prompt_style: str = "full") -> dict[str, list[dict]]:
    """{"train": rows, "val": rows} of the project's tasks, ``seeds_per_task`` seeds each from its first."""
    if seeds_per_task < 1:
        raise ApplicationError("seeds_per_task must be at least 1.")
    out: dict[str, list[dict]] = {"train": [], "val": []}
    specs = list(TaskSpec.objects.filter(project_id=project_id).order_by("task_name", "split", "id"))
    if not specs:
        raise ApplicationError(f"Project {project_id} has no tasks (or there is no such project).", status=404)
    for spec in specs:
        split = "train" if spec.split == Split.TRAIN else "val"
        last = min(spec.seed_end, spec.seed_start + seeds_per_task - 1)
        for seed in range(spec.seed_start, last + 1):
            out[split].append({
                "data_source": f"loupe:{spec.task_name}", "agent_name": AGENT, "ability": "gui",
                "prompt": [{"role": "system", "content": system_prompt(prompt_style)},
                           {"role": "user", "content": ASK.format(task=spec.task_name)}],
                "reward_model": {"style": "rule", "ground_truth": ""},
                "extra_info": {"index": len(out[split]), "project": project_id, "task": spec.task_name,
                               "task_id": spec.pk, "seed": seed, "split": spec.split, "env_kind": spec.env_kind,
                               "format": action_format, "prompt_style": prompt_style}})
    return out


def snapshot_rows(*, snapshot: DatasetSnapshot) -> list[dict]:
    """An RL snapshot's step rows as verl rows (text rows; a vision-language snapshot's images are not exported)."""
    if snapshot.kind != SnapshotKind.RL or snapshot.status != SnapshotStatus.READY or not snapshot.file:
        raise ApplicationError(f"Snapshot {snapshot.pk} is a {snapshot.status} {snapshot.kind} snapshot; export a "
                               "ready RL snapshot.", status=409)
    rows = []
    with default_storage.open(snapshot.file, "rb") as fh:
        for number, line in enumerate(fh):
            row = json.loads(line)
            if row.get("images"):
                raise ApplicationError(f"Row {number} of snapshot {snapshot.pk} has screenshots: exporting a "
                                       "vision-language snapshot for verl is not supported yet.", status=409)
            rows.append({
                "data_source": f"loupe:snapshot:{snapshot.pk}", "ability": "gui", "prompt": row["messages"],
                "reward_model": {"style": "rule", "ground_truth": json.dumps(row.get("reward"))},
                "extra_info": {"index": number, "snapshot": snapshot.pk, "format": row.get("format", "loupe"),
                               "width": row.get("width", 0), "height": row.get("height", 0)}})
    return rows


def write_parquet(rows: list[dict], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path
