"""Did the next checkpoint learn it? After a cycle's evaluation, every corrected step that went into the candidate's
training rows (an edit, a takeover, a rejection answered by the step that ran), and every corrected step of its
validation split (``held_out``: the honest figure), is asked of the candidate again, greedy: the step's prompt as its
row renders it for the candidate (from the step's stored state, in the candidate's prompt style and action format:
the stored prompt was written for the checkpoint that acted then). The correction is *learned* when the answer is
the person's action: the same canonical action, or a click inside the same element.

Which steps the rows came from: each training row names its step (``meta.step_id``, snapshots/rows.py), and
the cycle's stages keep their files (``data_file`` to train on, ``val_file`` held out; cycles/replay.py).
One ``CorrectionReplay`` a cycle and step; a retried evaluation replays only what is missing."""
from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from django.db.models import Exists, OuterRef

from agent import formats
from agent.policies.local import LocalPolicy
from cycles.models import Cycle, CycleState
from rollouts.models import Actor, Correction, CorrectionKind, CorrectionReplay, Rejection, Step
from training.models import TrainingRun

log = logging.getLogger(__name__)

CLICKS = ("click", "double_click", "right_click")


def correction_kind(step: Step, rejected: bool) -> str | None:
    """The kind of correction a step is (CorrectionKind), or None: the model's step as proposed, an edit of the
    thought alone, or a takeover that did what the model proposed teach no action."""
    if step.action is None:
        return None
    if step.actor == Actor.HUMAN and step.correction in (Correction.NONE, Correction.ACTION):
        return CorrectionKind.TAKEOVER
    if step.actor == Actor.EDITED and step.correction == Correction.ACTION:
        return CorrectionKind.EDIT
    if step.actor == Actor.MODEL and rejected:
        return CorrectionKind.REJECTION
    return None


def _inside(element: dict, x, y) -> bool:
    return (abs(x - element.get("x", 0)) * 2 < max(element.get("width") or 0, 1)
            and abs(y - element.get("y", 0)) * 2 < max(element.get("height") or 0, 1))


def same_action(answer: dict | None, corrected: dict, elements: list[dict]) -> bool:
    """Whether ``answer`` (a canonical action dict, None for a void turn) does what ``corrected`` does: the same
    action, or both clicks of a kind inside the innermost element under the corrected click."""
    if answer is None or answer.get("name") != corrected.get("name"):
        return False
    if answer.get("args") == corrected.get("args"):
        return True
    if corrected["name"] not in CLICKS:
        return False
    x, y = (answer.get("args") or {}).get("x"), (answer.get("args") or {}).get("y")
    cx, cy = corrected["args"].get("x"), corrected["args"].get("y")
    if not all(isinstance(v, (int, float)) for v in (x, y, cx, cy)):
        return False
    under = [e for e in elements or [] if _inside(e, cx, cy)]
    if not under:
        return False
    target = min(under, key=lambda e: (e.get("width") or 0) * (e.get("height") or 0))
    return _inside(target, x, y)


def row_prompt(row: dict) -> list[dict]:
    """What a row asks the model: a DPO pair's prompt, or an SFT row's messages before its last assistant turn."""
    if "prompt" in row:
        return row["prompt"]
    messages = row.get("messages") or []
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=len(messages))
    return messages[:last]


def _row_prompts(path: str) -> dict[int, list[dict]]:
    """Per step a file's rows name, the prompt of its first row there."""
    prompts: dict[int, list[dict]] = {}
    if not path or not Path(path).is_file():
        return prompts
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                step_id = (row.get("meta") or {}).get("step_id")
                if isinstance(step_id, int) and step_id not in prompts:
                    prompts[step_id] = row_prompt(row)
    return prompts


def training_steps(cycle: Cycle) -> tuple[dict[int, list[dict]], dict[int, list[dict]]]:
    """The steps whose rows the cycle's candidate trained on, and those held out for validation (none of both), each
    with the prompt its row asks."""
    run = TrainingRun.objects.filter(pk=cycle.run_id).only("config").first()
    trained: dict[int, list[dict]] = {}
    held: dict[int, list[dict]] = {}
    for stage in ((run.config or {}).get("stages") or []) if run else []:
        trained = {**_row_prompts(stage.get("data_file", "")), **trained}
        held = {**_row_prompts(stage.get("val_file", "")), **held}
    return trained, {step: prompt for step, prompt in held.items() if step not in trained}


def _policy_for(checkpoint):
    max_tokens = 96 if checkpoint.action_format == "loupe" else 384
    return LocalPolicy(checkpoint.uri, max_new_tokens=max_tokens)


def corrections_replay(cycle: Cycle, *, on_progress: Callable[[int, int], None] | None = None) -> dict:
    """Ask the cycle's candidate every corrected step of its training rows and validation split; store whether it
    learned each (CorrectionReplay) and return :func:`learned_summary`. A candidate that reads screenshots is not
    asked (the local policy runs text models): the summary says so."""
    candidate = cycle.candidate
    if candidate is None:
        return learned_summary(cycle)
    if candidate.reads_images:
        return {**learned_summary(cycle), "not_replayed": "the candidate reads screenshots; corrections are replayed "
                                                          "on text checkpoints only"}
    trained, held = training_steps(cycle)
    prompts = {**held, **trained}
    done = set(CorrectionReplay.objects.filter(cycle=cycle).values_list("step_id", flat=True))
    steps = (Step.objects.filter(pk__in=set(prompts) - done)
             .annotate(rejected=Exists(Rejection.objects.filter(step=OuterRef("pk")))).order_by("pk"))
    todo = [(step, kind) for step in steps if (kind := correction_kind(step, step.rejected))]
    policy = _policy_for(candidate) if todo else None
    for i, (step, kind) in enumerate(todo):
        if on_progress:
            on_progress(i, len(todo))
        prompt = prompts[step.pk]
        if not prompt:
            continue
        answer = policy.act(prompt, temperature=0.0)
        turn = formats.parse(answer.text, format=candidate.action_format, width=step.width, height=step.height)
        learned = same_action(turn.action.to_dict() if turn.action else None, step.action, step.elements)
        CorrectionReplay.objects.get_or_create(cycle=cycle, step=step, defaults={
            "kind": kind, "held_out": step.pk in held, "learned": learned, "answer": answer.text or answer.error or ""})
    return learned_summary(cycle)


def _share(flags: list[bool]) -> dict:
    return {"corrections": len(flags), "learned": sum(flags),
            "share": round(sum(flags) / len(flags), 4) if flags else None}


def learned_summary(cycle: Cycle) -> dict:
    """The cycle's learned shares: of its trained corrections, of its held-out ones, and of both per task and per
    kind of correction."""
    rows = list(CorrectionReplay.objects.filter(cycle=cycle)
                .values_list("kind", "held_out", "learned", "step__episode__task__task_name"))
    by_task: dict[str, dict[bool, list[bool]]] = defaultdict(lambda: {False: [], True: []})
    by_kind: dict[str, dict[bool, list[bool]]] = defaultdict(lambda: {False: [], True: []})
    for kind, held_out, learned, task in rows:
        by_task[task][held_out].append(learned)
        by_kind[kind][held_out].append(learned)
    return {
        "trained": _share([learned for _, held, learned, _ in rows if not held]),
        "held_out": _share([learned for _, held, learned, _ in rows if held]),
        "by_task": [{"task": task, "trained": _share(v[False]), "held_out": _share(v[True])}
                    for task, v in sorted(by_task.items())],
        "by_kind": [{"kind": kind, "trained": _share(v[False]), "held_out": _share(v[True])}
                    for kind, v in sorted(by_kind.items())],
    }


def annotator_learned(*, project) -> list[dict]:
    """Per annotator, the share of their corrections that the checkpoints promoted since learned (cycles that
    deployed their candidate)."""
    rows = list(CorrectionReplay.objects.filter(cycle__project=project, cycle__state=CycleState.DEPLOYED)
                .values_list("step__intervened_by__username", "step_id", "learned"))
    rejecters = dict(Rejection.objects.filter(step_id__in=[step for name, step, _ in rows if not name],
                                              rejected_by__isnull=False).order_by("-attempt")
                     .values_list("step_id", "rejected_by__username"))  # an answered rejection is its rejecter's
    per: dict[str, list[bool]] = defaultdict(list)
    for username, step, learned in rows:
        username = username or rejecters.get(step)
        if username:
            per[username].append(learned)
    return [{"username": name, **_share(flags)} for name, flags in sorted(per.items())]
