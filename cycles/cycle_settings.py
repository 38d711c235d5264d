"""A project's cycle settings: the recipe, the gate, the evaluation, the schedule and how its policy is served
(backend, export, and how many earlier screenshots a screen-reading checkpoint gets), validated with messages a
manager can act on; the schedule is a django-celery-beat periodic task."""
from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from core.errors import ApplicationError
from cycles import replay
from projects.models import Project, Split
from projects.project_settings import Section, section_of, section_set
from rollouts.history import CYCLE_SECTION, DEFAULT_HISTORY_IMAGES
from snapshots.models import SnapshotKind
from training.runs import DEFAULT_MAX_EPOCHS, online_stage_check

BUCKET_FOR_ALGORITHM = {"sft": SnapshotKind.SFT, "dpo": SnapshotKind.DPO, "rl": SnapshotKind.RL}
STAGE_KEYS = {"algorithm", "max_steps", "max_seconds", "max_epochs", "lr", "lora", "group_size", "max_new_tokens",
              "batch_tokens", "min_rows", "online", "task", "seeds", "max_turns"}
ONLINE_KEYS = ("task", "seeds", "max_turns")  # an online rl stage's (training.online_stage_check)
# A stage the gate finds fewer new rows for than this is dropped (and the cycle skipped when no stage is left):
# an SFT stage holds some out for validation and needs some to train on; one DPO pair whose actions differ
# already teaches something.
MIN_STAGE_ROWS = {"sft": 8, "dpo": 1, "rl": 4}
DEFAULTS = {
    "min_new_rows": 20,  # new routed rows (recipe buckets, train split) since the last trained cycle
    # The steps follow the data: max_epochs passes over the stage's rows (new and replayed), max_steps only caps
    # them. A LoRA from the deployed checkpoint, validated on held-out corrections (val_from): full fine-tunes of a
    # good v0 broke what it knew, this recipe's candidates were promoted (README, Sizing). DPO is a stage to add on
    # the Cycles page.
    "recipe": [{"algorithm": "sft", "max_steps": 1000, "lr": 0.003, "max_epochs": 3, "batch_tokens": 2048,
                "lora": "r=16"}],
    "replay_ratio": 2.0,  # replayed rows (what the deployed checkpoint learnt from) per new SFT row; 0: none
    "replay_max_rows": 600,  # the SFT mix (new + replayed rows) holds at most this many
    "correction_weight": 3,  # each SFT row of a step a person corrected (edit, takeover) counts this many times
    "val_fraction": 0.15,  # share of the new SFT rows held out for the validation loss
    "val_min_rows": 2,  # ... and at least this many
    # "corrected": the validation rows are some of the corrected steps plus replayed rows (learning vs forgetting);
    # "new": a sample of all new rows (mostly approved steps the checkpoint predicts already)
    "val_from": "corrected",
    "patience": 3,  # stop SFT when the validation loss has not improved for this many progress lines (0: never)
    "eval_tasks": [],  # TaskSpec ids of the eval split; empty: every eval task of the project
    "eval_seeds": 10,  # the first N seeds of each eval task's range, the same in every cycle
    "eval_max_steps": 0,  # step limit of an eval episode; 0: the task's own max_steps
    "margin": 0.05,  # the candidate must beat the deployed checkpoint's success rate by this much
    "auto_deploy": True,  # False: a manager approves every candidate that passes the gate
    "backend": "",  # local | openai; empty: LOUPE_POLICY_BACKEND
    "export": "lora",  # openai backend: load the LoRA adapter (vLLM) or the full weights (trainer serve only)
    "base_checkpoint": None,  # openai + lora: the checkpoint the server was launched with (adapters fit it)
    # a checkpoint that reads screenshots gets the current one and this many of earlier steps (UI-TARS-1.5: 5)
    "history_images": DEFAULT_HISTORY_IMAGES,
}
MAX_HISTORY_IMAGES = 10
# The cycle recipe for a pretrained base whose v0 is a LoRA (SmolLM2-135M-Instruct, the demo project's: issue 34),
# what the demo project starts with and what the flywheel demonstration runs: a fresh LoRA from the deployed weights at
# v0's learning rate, the steps sized to the rows (two passes, at most 80 steps of about 4 rows), a replay of v0's
# demonstrations as large as the new rows, early stopping when the validation loss has not improved for two progress
# lines. DEFAULTS' 0.003 for up to 1,000 steps suits the tests' tiny random models.
# The cap was 40: every cycle stopped there with its validation loss still falling. Seed 3's first cycle from one v0,
# side by side (mixes of 170 rows, 164 of them the same): 92.9 % on the 141 held-out episodes with 80 steps against
# 78.0 % with 40, 29 of 33 trained corrections learned against 18 of 34, click-link kept at 100 % (85 %); README.
PRETRAINED_LORA = {"recipe": [{"algorithm": "sft", "max_steps": 80, "lr": 0.001, "max_epochs": 2, "batch_tokens": 1024,
                               "lora": "r=16"}],
                   "replay_ratio": 1.0, "patience": 2}
SCHEDULE_TASK = "flywheel.tasks.cycle_scheduled"
MAX_CADENCE_MINUTES = 60 * 24 * 31


# --- settings ------------------------------------------------------------------------------------
def _schedule_name(project_id: int) -> str:
    return f"flywheel cycle: project {project_id}"


def cadence_of(project: Project) -> dict:
    """The schedule, read from its PeriodicTask (the one source of truth, editable in the admin too)."""
    task = PeriodicTask.objects.filter(name=_schedule_name(project.pk)).select_related("interval").first()
    if task is None or not task.enabled:
        return {"cadence_minutes": 0, "schedule": "manual only", "last_scheduled_at": task.last_run_at if task else None}
    minutes = None
    if task.interval is not None:
        seconds = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}[task.interval.period]
        minutes = round(task.interval.every * seconds / 60, 2)
    return {"cadence_minutes": minutes, "schedule": str(task.schedule if task.interval is None else task.interval),
            "last_scheduled_at": task.last_run_at}


def _read(stored: dict, project: Project) -> dict:
    return {**stored, "backend": stored["backend"] or settings.LOUPE_POLICY_BACKEND}


def settings_of(project: Project) -> dict:
    """The project's cycle settings with defaults filled in (without the cadence; see cadence_of)."""
    return section_of(CYCLE_SETTINGS, project)


def _bad(field: str, message: str):
    # the field's own message is shown beside it, as a sentence; the detail names the field
    raise ApplicationError(f"{field}: {message}", errors={field: [message[:1].upper() + message[1:]]})


def _int(field: str, value, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        _bad(field, f"use a whole number from {lo} to {hi}.")
    return value


def _recipe_clean(recipe, project: Project) -> list[dict]:
    if not isinstance(recipe, list) or not 1 <= len(recipe) <= 3:
        _bad("recipe", "give 1 to 3 stages, e.g. [{\"algorithm\": \"sft\", \"max_steps\": 200}].")
    out, seen = [], set()
    for i, stage in enumerate(recipe):
        if not isinstance(stage, dict):
            _bad("recipe", f"stage {i + 1} must be an object.")
        unknown = sorted(set(stage) - STAGE_KEYS)
        if unknown:
            _bad("recipe", f"stage {i + 1} has an unknown key '{unknown[0]}'; known: {', '.join(sorted(STAGE_KEYS))}.")
        algorithm = stage.get("algorithm")
        if algorithm not in BUCKET_FOR_ALGORITHM:
            _bad("recipe", f"stage {i + 1}: algorithm must be sft, dpo or rl.")
        if algorithm in seen:
            _bad("recipe", f"{algorithm} appears twice.")
        seen.add(algorithm)
        clean = {"algorithm": algorithm, "max_steps": _int("recipe", stage.get("max_steps", 100), 1, 1_000_000)}
        if stage.get("max_seconds") not in (None, 0):
            clean["max_seconds"] = _int("recipe", stage["max_seconds"], 1, 7 * 86400)
        if algorithm != "rl":  # RL iterates over fresh batches: passes over the rows mean nothing there
            clean["max_epochs"] = _int("recipe", stage.get("max_epochs", DEFAULT_MAX_EPOCHS), 0, 1000)
        if stage.get("lr") is not None:
            lr = stage["lr"]
            if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < 1:
                _bad("recipe", f"stage {i + 1}: lr must be a number between 0 and 1.")
            clean["lr"] = float(lr)
        for key, low, high in (("group_size", 2, 64), ("max_new_tokens", 1, 4096)):  # GRPO (training.py)
            if stage.get(key) is not None:
                if algorithm != "rl":
                    _bad("recipe", f"stage {i + 1}: {key} is an rl stage's setting (answers sampled per prompt, "
                                   "their length).")
                clean[key] = _int("recipe", stage[key], low, high)
        if stage.get("online") or any(stage.get(key) is not None for key in ONLINE_KEYS):
            _online_clean(project, stage, i, clean)
        if stage.get("batch_tokens") is not None:
            if algorithm == "rl":
                _bad("recipe", f"stage {i + 1}: batch_tokens is an sft or dpo stage's setting.")
            clean["batch_tokens"] = _int("recipe", stage["batch_tokens"], 128, 1_000_000)
        if stage.get("min_rows") is not None:
            clean["min_rows"] = _int("recipe", stage["min_rows"], 1, 1_000_000)
        if stage.get("lora"):
            if not isinstance(stage["lora"], str) or not stage["lora"].startswith("r="):
                _bad("recipe", f"stage {i + 1}: lora looks like 'r=8' or 'r=16,alpha=32'.")
            clean["lora"] = stage["lora"]
        out.append(clean)
    return out


def _online_clean(project: Project, stage: dict, i: int, clean: dict) -> None:
    """An online rl stage: whole episodes of one task played through the environment service (training.py)."""
    if stage["algorithm"] != "rl":
        _bad("recipe", f"stage {i + 1}: online, task, seeds and max_turns are an rl stage's settings (whole episodes "
                       "played through the environment service).")
    if stage.get("online") is not True:
        _bad("recipe", f"stage {i + 1}: task, seeds and max_turns belong to an online rl stage: set online to true.")
    try:
        clean.update(online_stage_check(project, stage, field="recipe"))
    except ApplicationError as exc:
        _bad("recipe", f"stage {i + 1}: {exc.message}")
    if stage.get("max_turns") is not None:
        clean["max_turns"] = _int("recipe", stage["max_turns"], 1, 200)


def _clean(project: Project, current: dict, changes: dict) -> dict:
    """The project's cycle settings (``current``) with ``changes`` applied, validated; raises naming the bad field."""
    merged = {**current, **changes}
    clean = {
        "min_new_rows": _int("min_new_rows", merged["min_new_rows"], 0, 10_000_000),
        "recipe": _recipe_clean(merged["recipe"], project),
        "eval_seeds": _int("eval_seeds", merged["eval_seeds"], 1, 1000),
        "eval_max_steps": _int("eval_max_steps", merged["eval_max_steps"], 0, 200),
    }
    ratio = merged["replay_ratio"]
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 100:
        _bad("replay_ratio", "use a number of replayed rows per new row from 0 (no replay) to 100; 2 makes the new "
                             "rows a third of the SFT mix.")
    clean["replay_ratio"] = float(ratio)
    clean["replay_max_rows"] = _int("replay_max_rows", merged["replay_max_rows"], 1, 10_000_000)
    clean["correction_weight"] = _int("correction_weight", merged["correction_weight"], 1, 100)
    fraction = merged["val_fraction"]
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 0.5:
        _bad("val_fraction", "use a share of the new SFT rows from 0 (no validation) to 0.5.")
    clean["val_fraction"] = float(fraction)
    clean["val_min_rows"] = _int("val_min_rows", merged["val_min_rows"], 1, 10_000)
    if merged["val_from"] not in replay.VAL_FROM:
        _bad("val_from", "use 'corrected' (hold out some corrected steps and replayed rows) or 'new' (a sample of all "
                         "new rows).")
    clean["val_from"] = merged["val_from"]
    clean["patience"] = _int("patience", merged["patience"], 0, 1000)
    if clean["patience"] and not clean["val_fraction"]:
        _bad("patience", "stopping early reads the validation loss: set val_fraction above 0, or patience to 0.")
    if not isinstance(merged["history_images"], int) or isinstance(merged["history_images"], bool) or \
            not 0 <= merged["history_images"] <= MAX_HISTORY_IMAGES:
        _bad("history_images", f"use a whole number of earlier screenshots from 0 to {MAX_HISTORY_IMAGES} (UI-TARS-1.5 "
                               "reads 5); each one costs the model a screenshot's worth of tokens.")
    clean["history_images"] = merged["history_images"]
    tasks = merged["eval_tasks"]
    if not isinstance(tasks, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tasks):
        _bad("eval_tasks", "give a list of task ids.")
    known = set(project.tasks.filter(pk__in=tasks, split=Split.EVAL).values_list("pk", flat=True))
    missing = [t for t in tasks if t not in known]
    if missing:
        _bad("eval_tasks", f"task {missing[0]} is not an eval-split task of this project.")
    clean["eval_tasks"] = sorted(known)
    margin = merged["margin"]
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin <= 1:
        _bad("margin", "use a share of episodes from 0 to 1 (0.05 is 5 points of success rate).")
    clean["margin"] = float(margin)
    if not isinstance(merged["auto_deploy"], bool):
        _bad("auto_deploy", "use true or false.")
    clean["auto_deploy"] = merged["auto_deploy"]
    if merged["backend"] not in ("local", "openai"):
        _bad("backend", "use local or openai.")
    clean["backend"] = merged["backend"]
    if merged["export"] not in ("lora", "full"):
        _bad("export", "use lora or full.")
    clean["export"] = merged["export"]
    if clean["backend"] == "openai" and clean["export"] == "full" and settings.LOUPE_OPENAI_SERVER != "loupe":
        # vLLM's /v1/load_lora_adapter reads a PEFT adapter dir; a whole checkpoint there fails at deploy time
        _bad("export", "the policy server is vLLM (LOUPE_OPENAI_SERVER), which loads only LoRA adapters while it runs, "
                       "not a whole checkpoint: use export lora with the base_checkpoint vLLM was started with, or "
                       "serve with python -m trainer serve (LOUPE_OPENAI_SERVER=loupe), which loads full checkpoints.")
    base = merged["base_checkpoint"]
    if base is not None and not project.checkpoints.filter(pk=base).exists():
        _bad("base_checkpoint", "no such checkpoint in this project.")
    clean["base_checkpoint"] = base
    if clean["backend"] == "openai" and clean["export"] == "lora":
        if base is None:
            _bad("base_checkpoint", "the openai backend with LoRA export needs the checkpoint the server was started "
                                    "with: adapters are trained from it.")
        if len(clean["recipe"]) != 1:
            _bad("recipe", "with LoRA export a cycle trains one adapter on the served base: use one stage.")
        clean["recipe"] = [{**stage, "lora": stage.get("lora", "r=8")} for stage in clean["recipe"]]
    return clean


CYCLE_SETTINGS = Section(key=CYCLE_SECTION, defaults=DEFAULTS, clean=_clean, read=_read, audit_action="cycle.settings")


def settings_clean(project: Project, changes: dict) -> dict:
    """The project's cycle settings with ``changes`` applied, validated (nothing stored): a cycle's config."""
    return _clean(project, settings_of(project), changes)


@transaction.atomic
def settings_set(*, project: Project, actor, cadence_minutes: int | None = None, **changes) -> dict:
    """Change a project's cycle settings (and its schedule); returns settings + cadence."""
    unknown = sorted(set(changes) - set(DEFAULTS))
    if unknown:
        _bad(unknown[0], f"unknown setting; known: {', '.join(sorted([*DEFAULTS, 'cadence_minutes']))}.")
    cadence = {"cadence_minutes": cadence_minutes} if cadence_minutes is not None else {}
    clean = section_set(section=CYCLE_SETTINGS, project=project, actor=actor, changes=changes, audit_extra=cadence)
    if cadence_minutes is not None:  # a bad cadence rolls the settings back with it
        _int("cadence_minutes", cadence_minutes, 0, MAX_CADENCE_MINUTES)
        schedule_set(project=project, minutes=cadence_minutes)
    return {**clean, **cadence_of(project)}


def schedule_set(*, project: Project, minutes: int) -> None:
    """Create, change or pause the project's PeriodicTask (django-celery-beat): a cycle every ``minutes``."""
    name = _schedule_name(project.pk)
    if not minutes:
        PeriodicTask.objects.filter(name=name).update(enabled=False)
        return
    interval, _ = IntervalSchedule.objects.get_or_create(every=minutes, period=IntervalSchedule.MINUTES)
    PeriodicTask.objects.update_or_create(name=name, defaults={
        "task": SCHEDULE_TASK, "interval": interval, "crontab": None, "args": json.dumps([project.pk]),
        "enabled": True, "description": f"Flywheel cycle of {project.name} (Cycles page settings)."})
