"""A cycle's recipe as stages: the rows each bucket holds, whether a stage has enough new rows, the data a stage
trains on (new rows, replayed ones, their images), and the checkpoint it starts from (the deployed one)."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

from core.errors import ApplicationError
from cycles import cycle_settings, replay
from cycles.models import Cycle
from projects.models import Project, Split
from rollouts.models import Checkpoint, Deployment
from snapshots import buckets
from snapshots.models import DatasetSnapshot, SnapshotEpisode, SnapshotStatus
from snapshots.snapshot_kinds import DPO_KIND


# --- what a cycle reads --------------------------------------------------------------------------
def _trained_on(project: Project, kind: str):
    """Episodes whose rows of ``kind`` a candidate has already been trained on (snapshots of trained cycles)."""
    return SnapshotEpisode.objects.filter(snapshot__project=project, snapshot__kind=kind,
                                          snapshot__cycles__candidate__isnull=False).values("episode_id")


def bucket_rows(project: Project, config: dict) -> dict:
    """Per recipe bucket: train-split rows in all, and rows no cycle has trained on yet (for DPO also the new
    pairs whose actions differ, ``new_differing``)."""
    out, target = {}, buckets.export_target(project)  # RL rows are steps for a checkpoint that reads screenshots
    for stage in config["recipe"]:
        kind = cycle_settings.BUCKET_FOR_ALGORITHM[stage["algorithm"]]
        episodes = buckets.filter_apply(buckets.bucket_episodes(project, kind), project, kind, {"split": Split.TRAIN})
        new = episodes.exclude(pk__in=_trained_on(project, kind))
        out[kind] = {"rows": buckets.row_count(kind, episodes, target),
                     "new_rows": buckets.row_count(kind, new, target)}
        if kind == DPO_KIND.name:
            out[kind]["new_differing"] = DPO_KIND.differing_count(new)
    return out


def stage_verdicts(config: dict, rows: dict) -> dict:
    """Per recipe bucket, whether its stage's new rows can help (``ok``), and if not ``why``, with the number
    it has and needs: an SFT stage holds some out for validation and trains on the rest; a DPO pair whose chosen
    and rejected actions are the same (an edit of the thought alone) teaches the action nothing."""
    out = {}
    for stage in config["recipe"]:
        algorithm = stage["algorithm"]
        kind = cycle_settings.BUCKET_FOR_ALGORITHM[algorithm]
        bucket = rows[kind]
        # a project that set min_new_rows below a stage's default asked for cycles on that little data (0: train
        # again on what the snapshots hold, new rows or not)
        need = stage.get("min_rows") or min(cycle_settings.MIN_STAGE_ROWS[algorithm], config["min_new_rows"])
        why = None
        if not need:
            have = bucket.get("new_differing", bucket["new_rows"])
        elif algorithm == "dpo":
            have = bucket.get("new_differing", bucket["new_rows"])
            if bucket["new_rows"] and not have:
                why = (f"dpo: none of its {bucket['new_rows']} new pairs changes the action (edits of the thought "
                       "alone); DPO would learn nothing from them")
            elif have < need:
                why = f"dpo: {have} new pairs whose actions differ, its recipe needs at least {need}"
        else:
            have = bucket["new_rows"]
            if have < need:
                why = f"{algorithm}: {have} new rows, its recipe needs at least {need}"
                if algorithm == "sft" and config.get("val_fraction") and need >= replay.MIN_ROWS_TO_HOLD_OUT:
                    held = replay.val_rows_for(need, config["val_fraction"], config.get("val_min_rows", 1))
                    why += f" ({held} held out for validation, the rest to train on)"
        out[kind] = {"ok": why is None, "new": have, "needed": need, **({"why": why} if why else {})}
    return out


def stage_ok(cycle: Cycle, kind: str) -> bool:
    """Whether the gate kept the stage of bucket ``kind`` (a cycle gated before verdicts existed keeps all)."""
    return ((cycle.decision_data or {}).get("gate", {}).get("stages", {}).get(kind) or {"ok": True})["ok"]


def _stage_data(cycle: Cycle, stage: dict, snapshot, init: Checkpoint | None) -> dict:
    """What a stage trains on besides its snapshot (cycles/replay.py), written under the cycle's directory:
    SFT on the new rows less a validation split plus a replay sample of the init checkpoint's lineage; DPO on the
    pairs whose actions differ. The same for text and screenshot rows: a screenshot row's images are placed beside
    the files (images/<name>, as in the export bundle). RL trains on the snapshot as it is."""
    config = cycle.config
    if stage["algorithm"] == "rl":
        return {}
    out_dir = cycle_dir(cycle) / "data"
    if stage["algorithm"] == "dpo":
        made = replay.dpo_differing(snapshot=snapshot, out_dir=out_dir)
        _place_images(made, [snapshot], out_dir)
        return made
    sources = replay.lineage_sources(init)
    made = replay.sft_mix(snapshot=snapshot, sources=sources, out_dir=out_dir,
                          seed=cycle.project_id * 100_003 + cycle.iteration, replay_ratio=config.get("replay_ratio", 0),
                          max_rows=config.get("replay_max_rows", 10_000_000),
                          val_fraction=config.get("val_fraction", 0), val_min_rows=config.get("val_min_rows", 1),
                          correction_weight=config.get("correction_weight", 1),
                          val_from=config.get("val_from", "new"))
    lineage = DatasetSnapshot.objects.filter(pk__in=[s["snapshot"] for s in sources if "snapshot" in s])
    _place_images(made, [snapshot, *lineage], out_dir)
    if made["val_file"]:
        made["patience"] = config.get("patience", 0)
    return made


def _place_images(made: dict, snapshots: list, out_dir: Path) -> None:
    """Screenshot rows (a checkpoint that reads them) find their images beside the stage's files."""
    if not ((snapshots[0].lineage or {}).get("rendered_for") or {}).get("reads_images"):
        return
    files = [made[key] for key in ("data_file", "val_file") if made.get(key)]
    try:
        placed = replay.place_images(files=files, snapshots=snapshots, out_dir=out_dir)
    except ValueError as exc:
        raise ApplicationError(f"The cycle's training rows cannot be laid out with their screenshots: {exc}.") from exc
    (made.get("mix") or made.get("pairs") or {})["images"] = placed


def candidate_init(cycle: Cycle) -> Checkpoint | None:
    """What the candidate trains from: the served base for LoRA adapters on openai, else the deployed checkpoint
    (None when the deployed policy has no weights, e.g. the scripted baseline after a rollback: its run then fails
    saying so, training.runs.NO_INIT)."""
    config = cycle.config
    if config["backend"] == "openai" and config["export"] == "lora":
        return Checkpoint.objects.get(pk=config["base_checkpoint"])
    deployed = deployed_checkpoint(cycle.project)
    return deployed if has_weights(deployed) else None


def run_stages(cycle: Cycle) -> tuple[list[dict], dict]:
    """The run's stages (those the gate kept and whose snapshot has rows) with their data, and per bucket the
    counts of that data (new, held-out, replayed rows; pairs kept), which the cycle shows."""
    snapshots = {s.kind: s for s in cycle.snapshots.filter(status=SnapshotStatus.READY)}
    init = candidate_init(cycle)
    stages, data = [], {}
    for stage in cycle.config["recipe"]:
        kind = cycle_settings.BUCKET_FOR_ALGORITHM[stage["algorithm"]]
        if kind not in snapshots or not stage_ok(cycle, kind):
            continue
        extra = _stage_data(cycle, stage, snapshots[kind], init)
        data[kind] = dict(extra.get("mix") or extra.get("pairs") or {})
        if "data_file" in extra and not extra["data_file"]:
            data[kind]["dropped"] = "no pair whose actions differ: the stage is left out"
            continue
        stages.append({**stage, "snapshot": snapshots[kind].pk, **extra})
    if not stages:
        raise ApplicationError("No stage is left with rows that can help: "
                               + "; ".join(f"{k}: {v.get('dropped', '')}" for k, v in data.items()))
    return stages, data


def deployed_checkpoint(project: Project) -> Checkpoint | None:
    deployment = Deployment.objects.filter(project=project, active=True).select_related("checkpoint").first()
    return deployment.checkpoint if deployment else None


def has_weights(checkpoint: Checkpoint | None) -> bool:
    return checkpoint is not None and bool(checkpoint.uri) and Path(checkpoint.uri).is_dir()


def cycle_dir(cycle: Cycle) -> Path:
    return settings.LOUPE_CHECKPOINT_DIR / f"project-{cycle.project_id}" / f"cycle-{cycle.iteration}"
