"""A cycle's decision after its evaluation: the gate's verdict with its numbers, deploying the candidate (or waiting
for a manager's approval), and a manager's approve or reject."""
from __future__ import annotations

import logging
from pathlib import Path

from django.db import transaction

from core.audit import audit_record
from core.errors import ApplicationError
from cycles.cycles import cycle_fail, cycle_locked, cycle_move, state_task
from cycles.models import Cycle, CycleState, Evaluation
from cycles.stages import deployed_checkpoint, has_weights
from rollouts.models import Checkpoint
from training import deployments, policy_server

log = logging.getLogger(__name__)


def _learned_words(summary: dict | None) -> str:
    """'; learned 12/14 corrections trained on, 3/4 held out' for the gate's report ('' when none were replayed)."""
    if not summary or not (summary["trained"]["corrections"] or summary["held_out"]["corrections"]):
        return ""
    trained, held = summary["trained"], summary["held_out"]
    return (f"; learned {trained['learned']}/{trained['corrections']} corrections trained on, "
            f"{held['learned']}/{held['corrections']} held out")


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate * 100:.1f}%"


def _beats(gain: float, margin: float) -> bool:
    """The gate's rule: a gain above 0 and at least the margin."""
    return gain > 0 and gain >= margin - 1e-9


def decision_of(cycle: Cycle) -> dict:
    """The gate's verdict with its numbers: promote only when the candidate's success rate beats the deployed
    checkpoint's, measured in this cycle on the same seeds, by at least the margin."""
    evaluations = {e.checkpoint_id: e for e in Evaluation.objects.filter(cycle=cycle)}
    candidate = evaluations[cycle.candidate_id]
    margin = cycle.config["margin"]
    data = {"candidate": {"checkpoint": cycle.candidate.name, "success_rate": candidate.success_rate,
                          "episodes": candidate.episodes},
            "margin": margin, "learned": (cycle.decision_data or {}).get("learned")}
    said = _learned_words(data["learned"])
    name = cycle.candidate.name
    if not has_weights(cycle.baseline):
        if cycle.baseline is None:
            what = "no deployed policy"
        elif cycle.baseline.uri.startswith("scripted:"):
            what = f"the scripted baseline '{cycle.baseline.name}'"
        else:
            what = f"'{cycle.baseline.name}', whose files are missing"
        data.update(deployed=None, promote=True)
        data["text"] = (f"promote: {name} reaches {_pct(candidate.success_rate)}; the project serves {what}, which "
                        "has no model to measure, so the first trained candidate replaces it (as v0 would)" + said)
        return data
    deployed = evaluations[cycle.baseline_id]
    gain = candidate.success_rate - deployed.success_rate
    data["deployed"] = {"checkpoint": cycle.baseline.name, "success_rate": deployed.success_rate,
                        "episodes": deployed.episodes}
    data["gain"] = round(gain, 6)
    data["promote"] = _beats(gain, margin)
    versus = (f"{name} {_pct(candidate.success_rate)} vs deployed {cycle.baseline.name} "
              f"{_pct(deployed.success_rate)} on the same {candidate.episodes} eval episodes")
    if data["promote"]:
        data["text"] = f"promote: {versus}; gain {gain * 100:+.1f} points >= margin {margin * 100:.1f}" + said
    else:
        data["text"] = f"rejected: {versus}; gain {gain * 100:+.1f} points, the margin is {margin * 100:.1f}"
        if not _beats(1 - deployed.success_rate, margin):
            # not even a candidate that succeeds every time could be promoted: the cycles would train and be
            # rejected for ever
            data["text"] += (f"; at {_pct(deployed.success_rate)} the deployed checkpoint cannot be beaten by the "
                             "margin on these eval tasks: add eval tasks it fails, or lower the margin")
        data["text"] += said
    return data


def cycle_decide(*, cycle_id: int) -> str:
    """Promote, reject, or wait for a manager (auto_deploy off)."""
    cycle = Cycle.objects.select_related("project", "candidate", "baseline").get(pk=cycle_id)
    if cycle.state != CycleState.DECIDE:
        return "moved on"
    if deployed_checkpoint(cycle.project) != cycle.baseline:
        # someone deployed or rolled back meanwhile: measure against what is deployed now
        with transaction.atomic():
            cycle = cycle_locked(cycle_id, CycleState.DECIDE)
            if cycle is None:
                return "moved on"
            cycle.state = CycleState.EVALUATE
            cycle.baseline = None
            cycle.save(update_fields=["state", "baseline", "updated_at"])
            transaction.on_commit(lambda: state_task("cycle_evaluate").delay(cycle_id))
        return CycleState.EVALUATE
    data = decision_of(cycle)
    if not data["promote"]:
        with transaction.atomic():
            cycle = cycle_locked(cycle_id, CycleState.DECIDE)
            if cycle is not None:
                cycle_move(cycle, CycleState.REJECTED, decision=data["text"][:300], decision_data={
                    **cycle.decision_data, "decision": data})
        return CycleState.REJECTED
    if not cycle.config["auto_deploy"]:
        text = f"awaiting a manager's approval; {data['text']}"
        Cycle.objects.filter(pk=cycle_id, state=CycleState.DECIDE).update(
            decision=text[:300], decision_data={**cycle.decision_data, "decision": data, "awaiting_approval": True})
        return "awaiting approval"
    return _deploy(cycle_id, data, actor=None, from_states=(CycleState.DECIDE,))


def _deploy(cycle_id: int, data: dict, *, actor, from_states: tuple) -> str:
    """Serve the candidate: on openai, load it into the running server under a new name first (idempotent);
    then promote it and close the cycle, in one transaction. A refused deployment fails the cycle."""
    cycle = Cycle.objects.select_related("project", "candidate").get(pk=cycle_id)
    config, candidate = cycle.config, cycle.candidate
    served_name = ""
    try:
        if candidate is None:
            raise ApplicationError("This cycle has no candidate checkpoint to deploy.", status=409)
        deployments.checkpoint_check_files(candidate.uri)
        if config["backend"] == "openai":
            served_name = policy_server.served_name_for(candidate)
            path = Path(candidate.uri) / "adapter" if config["export"] == "lora" else Path(candidate.uri)
            if not path.is_dir():
                raise ApplicationError(f"{path} does not exist: the candidate was not trained with LoRA, so it has no "
                                       "adapter to load. Set the recipe's stage to lora or the export to full.", status=409)
            # an adapter is checked against the base the server was started with (vLLM would apply a misfit as nothing)
            base = Checkpoint.objects.filter(pk=config.get("base_checkpoint")).values_list("uri", flat=True).first()
            policy_server.served_model_load(name=served_name, path=str(path), base=base)
        with transaction.atomic():
            cycle = Cycle.objects.select_for_update().get(pk=cycle_id)
            if cycle.state not in from_states:
                return "moved on"
            who = f"approved by {actor.username}" if actor is not None else "auto-deployed"
            deployment = deployments.deployment_promote(
                project=cycle.project, checkpoint=candidate, actor=actor, backend=config["backend"],
                served_name=served_name, reason=f"cycle {cycle.iteration}: {who}")
            if actor is None:
                text = data["text"]
            elif cycle.state == CycleState.REJECTED:
                text = f"{who} over the gate's verdict ({data['text']})"
            else:
                text = f"{who}; the gate said: {data['text']}"
            cycle_move(cycle, CycleState.DEPLOYED, deployment=deployment, decision=text[:300],
                  decision_data={**cycle.decision_data, "decision": {**data, "by": who}})
    except ApplicationError as exc:
        if actor is not None:
            raise  # a person asked: they see the refusal, and the cycle stays as it was
        cycle_fail(cycle_id, f"The deployment was refused: {exc.message}")
        return CycleState.FAILED
    return CycleState.DEPLOYED


def cycle_approve(*, cycle: Cycle, actor) -> Cycle:
    """A manager deploys the candidate by hand: one awaiting approval, or one the gate rejected."""
    if cycle.state not in (CycleState.DECIDE, CycleState.REJECTED) or cycle.candidate_id is None:
        raise ApplicationError(f"Cycle {cycle.iteration} is {cycle.state}; only a candidate awaiting approval or "
                               "rejected by the gate can be approved.", status=409)
    if cycle.state == CycleState.DECIDE and not cycle.decision_data.get("awaiting_approval"):
        raise ApplicationError("The gate is still deciding on this candidate; wait a moment.", status=409)
    data = dict(cycle.decision_data.get("decision") or {"text": f"{cycle.candidate.name} approved without a gate"})
    state = _deploy(cycle.pk, data, actor=actor, from_states=(CycleState.DECIDE, CycleState.REJECTED))
    if state != CycleState.DEPLOYED:
        raise ApplicationError("The cycle changed while you approved it; reload and try again.", status=409)
    audit_record(actor=actor, action="cycle.approve", target=f"cycle:{cycle.pk}", project_id=cycle.project_id,
                 data={"checkpoint": cycle.candidate_id})
    return Cycle.objects.get(pk=cycle.pk)


@transaction.atomic
def cycle_reject(*, cycle: Cycle, actor, reason: str = "") -> Cycle:
    """A manager turns down a candidate that awaits approval."""
    locked = cycle_locked(cycle.pk, CycleState.DECIDE)
    if locked is None or not locked.decision_data.get("awaiting_approval"):
        raise ApplicationError(f"Cycle {cycle.iteration} is not awaiting approval.", status=409)
    data = locked.decision_data.get("decision", {})
    text = f"rejected by {actor.username}" + (f": {reason}" if reason else "") + f"; {data.get('text', '')}"
    cycle_move(locked, CycleState.REJECTED, decision=text[:300],
          decision_data={**locked.decision_data, "awaiting_approval": False, "rejected_by": actor.username,
                         "reason": reason})
    audit_record(actor=actor, action="cycle.reject", target=f"cycle:{cycle.pk}", project_id=cycle.project_id,
                 data={"reason": reason})
    return locked
