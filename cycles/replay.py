"""A cycle's training data beyond its snapshots: replay of what the deployed checkpoint learnt from, a held-out
validation split of the new rows, and DPO pairs narrowed to those whose actions differ.

Why: a cycle trains from the deployed checkpoint on a few dozen new rows. Trained on those alone, a good v0
memorised them and forgot the rest (README, Sizing). So the SFT
stage trains on the new rows mixed with a sample of the rows the deployed checkpoint was trained on, found by
lineage: the checkpoint's training run's SFT snapshots (and the cold start's demonstrations, ``demos.jsonl`` in
the cold-start run's directory, written by ``python -m trainer coldstart --out``), then its init checkpoint's run,
and so on back to v0. A part of the rows is held out: by default some of the steps people corrected and as many
replayed rows; the trainer's validation loss on them keeps the weights of the check where the model had learnt most
of the corrections while still knowing what it knew (trainer/sft.py ``--val-data``; ``val_from`` in sft_mix).

A cycle's SFT snapshot holds every routed train row of the project (new since the last cycle and earlier ones):
those are the rows mixed and split here. Everything is deterministic given the cycle (its seed), and every count is
returned, to be shown on the cycle: how many rows the snapshot had, held out, replayed, and which replayed rows were left out because they were
rendered for another prompt style than the one the snapshot's rows are (the trainer refuses mixed styles).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

from django.core.files.storage import default_storage

from rollouts.models import Checkpoint
from snapshots.export import screenshot_names
from snapshots.models import DatasetSnapshot, SnapshotStatus
from snapshots.rows import image_path
from training.models import TrainingRun
from training.runs import COLDSTART, run_dir
from training.trainer_process import _place

MAX_LINEAGE_DEPTH = 50  # checkpoints walked back; a loop in the records cannot hang a cycle
MIN_ROWS_TO_HOLD_OUT = 8  # fewer new rows are all trained on: a validation loss of one or two rows says little


def _run_dir(run: TrainingRun) -> Path:
    return run_dir(run)


def lineage_sources(checkpoint: Checkpoint | None) -> list[dict]:
    """What ``checkpoint`` was trained on, nearest first: ``{"snapshot": id}`` for each SFT/CT snapshot of each
    training run on the way back, ``{"demos": path}`` for a cold start's demonstrations. Each source names the
    ``run`` and ``checkpoint`` it comes from."""
    sources, seen = [], set()
    while checkpoint is not None and checkpoint.pk not in seen and len(seen) < MAX_LINEAGE_DEPTH:
        seen.add(checkpoint.pk)
        run = TrainingRun.objects.filter(pk=checkpoint.produced_by_id).select_related("init_checkpoint").first()
        if run is None:
            break
        where = {"run": run.pk, "checkpoint": checkpoint.name}
        for stage in run.config.get("stages", []):
            if stage.get("algorithm") == COLDSTART:
                sources.append({"demos": str(_run_dir(run) / "demos.jsonl"), **where})
            elif stage.get("algorithm") == "sft" and stage.get("snapshot"):
                sources.append({"snapshot": stage["snapshot"], **where})
        checkpoint = run.init_checkpoint
    return sources


def _snapshot_rows(snapshot: DatasetSnapshot) -> list[dict]:
    with default_storage.open(snapshot.file, "rb") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _source_rows(source: dict) -> list[dict] | None:
    """The rows of one lineage source; None when they are gone (a deleted run directory or snapshot)."""
    if "demos" in source:
        path = Path(source["demos"])
        if not path.is_file():
            return None
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    snapshot = DatasetSnapshot.objects.filter(pk=source["snapshot"], status=SnapshotStatus.READY).first()
    if snapshot is None or not snapshot.file:
        return None
    return _snapshot_rows(snapshot)


def _key(row: dict) -> str:
    return json.dumps(row.get("messages"), sort_keys=True, ensure_ascii=False)


def _write(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def val_rows_for(n: int, fraction: float, minimum: int) -> int:
    """Rows of ``n`` new ones held out for validation: ``fraction`` of them, at least ``minimum``; none when
    ``fraction`` is 0 or there are fewer than :data:`MIN_ROWS_TO_HOLD_OUT`."""
    if fraction <= 0 or n < MIN_ROWS_TO_HOLD_OUT:
        return 0
    return min(n - 1, max(minimum, round(n * fraction)))


CORRECTED_ACTORS = ("edited", "human")  # a person's step over the model's: where the deployed checkpoint was wrong
VAL_FROM = ("corrected", "new")
MIN_CORRECTED_TO_HOLD_OUT = 4  # fewer corrected rows are all trained on: they are the only ones that teach


def _corrected(row: dict) -> bool:
    return (row.get("meta") or {}).get("actor") in CORRECTED_ACTORS


def sft_mix(*, snapshot: DatasetSnapshot, sources: list[dict], out_dir: Path, seed: int, replay_ratio: float,
            max_rows: int, val_fraction: float, val_min_rows: int, correction_weight: int = 1,
            val_from: str = "new") -> dict:
    """Write ``train.jsonl`` (the snapshot's rows less the held-out ones, each row of a person's corrected step
    ``correction_weight`` times, plus a replay sample of ``sources``: ``replay_ratio`` replayed rows a new one, the
    whole mix at most ``max_rows``) and ``val.jsonl`` (the held-out new rows) into ``out_dir``. Replayed rows are
    rendered as the snapshot's are (its lineage's rendered_for); rows of another rendering, and rows equal to a new
    one, are left out and counted. Returns the paths and counts.

    Why weight corrections: most new rows of a good checkpoint are its own approved steps, which it predicts
    already; the few a person corrected are where it was wrong, the only rows with something to teach.

    ``val_from``: ``"new"`` holds out a sample of all new rows. ``"corrected"`` holds out ``val_fraction`` of the
    corrected rows (at least one, when there are :data:`MIN_CORRECTED_TO_HOLD_OUT`) and, as a forgetting guard, as
    many replayed rows as ``"new"`` would hold out: its validation loss falls while the model learns what people
    corrected and rises when it forgets what it knew. A validation split of all new rows (mostly approved steps the
    checkpoint already predicts) rose from the first check, so early stopping kept the starting weights (issue 23).
    With too few corrected rows, or no replay pool, it falls back to ``"new"`` (said in the counts)."""
    target = (snapshot.lineage or {}).get("rendered_for")
    rng = random.Random(seed)
    new = _snapshot_rows(snapshot)
    rng.shuffle(new)
    n_val = val_rows_for(len(new), val_fraction, val_min_rows)
    corrected_new = [row for row in new if _corrected(row)]
    seen = {_key(row) for row in new}
    pool, other_style, duplicates, missing, used = [], 0, 0, [], []
    for source in sources:
        rows = _source_rows(source)
        if rows is None:
            missing.append(source)
            continue
        used.append({**source, "rows": len(rows)})
        for row in rows:
            rendered = row.get("rendered_for")
            if rendered is not None and target is not None and rendered != target:
                other_style += 1
            elif _key(row) in seen:
                duplicates += 1
            else:
                seen.add(_key(row))
                pool.append(row)
    used_from, guard = "new", []
    if val_from == "corrected" and n_val and len(corrected_new) >= MIN_CORRECTED_TO_HOLD_OUT and pool:
        used_from = "corrected"
        n_corrected = min(len(corrected_new) - 1, max(1, round(len(corrected_new) * val_fraction)))
        held = {id(row) for row in corrected_new[:n_corrected]}
        val = corrected_new[:n_corrected]
        train_new = [row for row in new if id(row) not in held]
        guard = rng.sample(pool, min(n_val, len(pool)))
        taken = {id(row) for row in guard}
        pool = [row for row in pool if id(row) not in taken]  # a guard row is never trained on
        val = [*val, *guard]
    else:
        val, train_new = new[:n_val], new[n_val:]
    corrected = [row for row in train_new if _corrected(row)]
    weighted = [*train_new, *(corrected * (correction_weight - 1))][:max_rows]
    wanted = min(round(replay_ratio * len(train_new)), max(0, max_rows - len(weighted)), len(pool))
    replay = rng.sample(pool, wanted) if wanted else []
    train = [*weighted, *replay]
    rng.shuffle(train)
    out_dir.mkdir(parents=True, exist_ok=True)
    train_path, val_path = out_dir / "sft-train.jsonl", out_dir / "sft-val.jsonl"
    _write(train_path, train)
    if val:
        _write(val_path, val)
    return {"data_file": str(train_path), "val_file": str(val_path) if val else "",
            "mix": {"snapshot_rows": len(new), "val_rows": len(val), "val_from": used_from,
                    "val_corrected_rows": len(val) - len(guard) if used_from == "corrected" else 0,
                    "val_replay_rows": len(guard),
                    "train_snapshot_rows": min(len(train_new), max_rows),
                    "corrected_rows": len(corrected), "correction_weight": correction_weight,
                    "replay_rows": len(replay), "replay_pool": len(pool), "train_rows": len(train),
                    "replay_other_rendering": other_style, "replay_duplicates": duplicates,
                    "replay_ratio": replay_ratio, "max_rows": max_rows, "seed": seed,
                    "sources": used, "missing_sources": missing}}


def place_images(*, files: list[str], snapshots: list[DatasetSnapshot], out_dir: Path) -> int:
    """Put the screenshots that the rows of ``files`` (in ``out_dir``) name as ``images/<name>`` beside them, as the
    export bundle lays them out (links to the stored files where the storage has local paths, else copies): rows of a
    checkpoint that reads screenshots, new and replayed, read their images there. ``snapshots``: the ones the rows
    come from, whose stored screenshots they name. Returns how many were placed; a name no snapshot holds is the
    cycle's error."""
    wanted = set()
    for file in files:
        with open(file, encoding="utf-8") as fh:
            wanted |= {name for line in fh if line.strip() for name in json.loads(line).get("images") or []}
    stored = {}
    for snapshot in snapshots:
        for name in screenshot_names(snapshot):
            stored.setdefault(image_path(name), name)
            if wanted <= set(stored):
                break
    missing = sorted(wanted - set(stored))
    if missing:
        raise ValueError(f"{len(missing)} screenshots the rows name are in none of their snapshots, e.g. {missing[0]}")
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    for name in wanted:
        target = out_dir / name
        if not target.exists():
            _place(stored[name], target)
    return len(wanted)


def dpo_differing(*, snapshot: DatasetSnapshot, out_dir: Path) -> dict:
    """Write ``dpo-train.jsonl``: the snapshot's pairs whose chosen action differs from the rejected one (a
    correction of the thought alone, ``meta.differs == "thought"``, teaches the action nothing). Returns the path
    and counts; ``data_file`` is empty when no pair is left."""
    rows = _snapshot_rows(snapshot)
    kept = [row for row in rows if (row.get("meta") or {}).get("differs", "action") != "thought"
            and row.get("chosen") != row.get("rejected")]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "dpo-train.jsonl"
    if kept:
        _write(path, kept)
    return {"data_file": str(path) if kept else "",
            "pairs": {"pairs": len(rows), "kept": len(kept), "dropped_same_action": len(rows) - len(kept)}}
