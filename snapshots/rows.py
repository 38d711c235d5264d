"""Dataset rows: a step rendered for the checkpoint the rows train (datasets.export_target), by the one prompt renderer
(agent/prompt.py) from the steps' structure: its prompt style and action format, its screenshots when it reads them;
a person's edits, takeovers and the proposals they turned down are written in its format. The pieces each snapshot
kind (snapshots/snapshot_kinds.py) makes its rows of."""
from __future__ import annotations

import os

from agent.actions import Action, Turn
from agent.envs.base import Element
from agent.rollout import rejection_feedback
from agent.rows import DPORow, GRPORow, RenderedFor, StepView, render_prompt, render_turn
from rollouts.models import Actor, Correction, Episode, Judgement, PolishState, Rejection, Step
from rollouts.steps import step_learned
from snapshots.branch_pairs import branch_pair


def image_path(screenshot: str) -> str:
    """Where a screenshot lies inside an export bundle (``images/<name>``, relative to data.jsonl: what
    trainer/vlm.py resolves a row's images against)."""
    return f"images/{os.path.basename(screenshot)}" if screenshot else ""


def step_view(step: Step) -> StepView:
    """What a step showed and what ran, as the rollout's prompts showed it (the thought as written then)."""
    return StepView(instruction=step.instruction, url=step.url, elements=[Element(**e) for e in step.elements],
                    screen_text=step.screen_text, width=step.width, height=step.height, screenshot=image_path(step.screenshot), thought=step.thought,
                    action=Action.from_dict(step.action) if step.action else None, raw=step.raw_output)


def _turn(thought: str, action: dict | None, raw: str) -> Turn:
    if action:
        return Turn(thought=thought, action=Action.from_dict(action), void_reason=None, raw=raw)
    return Turn(thought=thought, action=None, void_reason="void turn", raw=raw)


def step_rejections(step: Step) -> list[Rejection]:
    """The step's rejected proposals in attempt order: the list snapshots.buckets.rows_iter fetched with the steps
    (``rejections_in_order``), else a query. (Through the related manager each of a row's reads would build a new
    queryset.)"""
    fetched = getattr(step, "rejections_in_order", None)
    return fetched if fetched is not None else list(step.rejections.order_by("attempt"))


def step_feedback(rejections: list[Rejection], step: Step, target: RenderedFor) -> str | None:
    """What the model was told at this step, as the rollout told it: the step's own feedback (a person's answer to
    its call_user) and then the rejections of these proposals of the step, in the target's format."""
    rejects = (rejection_feedback([(_turn(r.thought, r.action, r.raw_output), r.reason) for r in rejections],
                                  target.action_format, step.width, step.height) if rejections else None)
    return " ".join(part for part in (step.feedback, rejects) if part) or None


def step_thought(step: Step) -> str:
    """The thought of the executed turn (a person's correction when edited). Where what a person said aloud during
    the step was polished into a thought (annotation/polish.py: done, or as a person edited it), that thought; a person
    who acted without writing a thought and without a polished one contributes what they said aloud, raw. On a step
    the model took and a person approved, what they said is commentary ("yes, that one"), not the model's reasoning:
    the model's thought stays unless a person edited the polished one into the thought they want trained on."""
    polished = step.polished_thought.strip() and (
        step.polish_state == PolishState.EDITED or (step.polish_state == PolishState.DONE and step.actor != Actor.MODEL))
    if polished:
        return step.polished_thought
    if not step.thought.strip() and step.actor != Actor.MODEL:
        return step.human_thought
    return step.thought


def _model_text(raw: str, spoken_in: str, thought: str, action: dict | None, step: Step, target: RenderedFor) -> str:
    """A model's answer (a proposal a person replaced or rejected) as the target writes it: as the model wrote it
    when that is the target's format, re-rendered from its canonical action when not; a void one as written."""
    if action is None or (raw and spoken_in == target.action_format):
        return raw
    return render_turn(thought, Action.from_dict(action), target, step.width, step.height)


def row_meta(episode: Episode, step: Step | None = None, **extra) -> dict:
    meta = {"episode_id": episode.pk, "task": episode.task.task_name, "seed": episode.seed, "mode": episode.mode,
            "checkpoint": episode.checkpoint.name if episode.checkpoint_id else None, "episode_reward": episode.env_reward,
            "instruction": episode.instruction, "outcome": episode.outcome}
    if step is not None:
        meta.update(step_index=step.index, step_id=step.pk, actor=step.actor, screenshot=image_path(step.screenshot),
                    rejected=[{"attempt": r.attempt, "reason": r.reason,
                               "action": Action.from_dict(r.action).to_text() if r.action else "(not an action)"}
                              for r in step_rejections(step)])
        if step.actor != Actor.MODEL or meta["rejected"]:  # a corrected step: did the candidates learn it
            replays = step_learned(step)
            if replays:
                meta["learned"] = replays
    return {**meta, **extra}


def assistant(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def dpo_rows(step: Step, view: StepView, history: list[StepView], chosen: str, target: RenderedFor,
              episode: Episode) -> list[dict]:
    """The preference pairs one step makes: the person's turn over the model's proposal it replaced (when it
    changed the action, or only the thought: marked ``"differs": "thought"``), and the executed turn over
    each rejected proposal of the step whose action differs, under the prompt that proposal answered (with the
    feedback of the rejections before it)."""
    rows = []
    rejections = step_rejections(step)
    if step.actor != Actor.MODEL and step.correction in (Correction.ACTION, Correction.THOUGHT) and step.proposal:
        proposal = step.proposal
        prompt, images = render_prompt(view, history, target, feedback=step_feedback(rejections, step, target))
        rejected = _model_text(proposal.get("raw") or "", step.action_format, proposal.get("thought", ""),
                               proposal.get("action"), step, target)
        rows.append(DPORow(prompt=prompt, chosen=assistant(chosen), rejected=assistant(rejected), images=images,
                           meta=row_meta(episode, step, pair="correction", differs=step.correction),
                           rendered_for=target).to_dict())
    if step.action is not None:
        for number, rejection in enumerate(rejections):
            if rejection.action == step.action:
                continue  # the person approved, in the end, what they had rejected: no preference
            prompt, images = render_prompt(view, history, target,
                                           feedback=step_feedback(rejections[:number], step, target))
            rejected = _model_text(rejection.raw_output, rejection.action_format, rejection.thought, rejection.action,
                                   step, target)
            rows.append(DPORow(prompt=prompt, chosen=assistant(chosen), rejected=assistant(rejected), images=images,
                               meta=row_meta(episode, step, pair="rejection", differs=Correction.ACTION,
                                          attempt=rejection.attempt, reason=rejection.reason),
                               rendered_for=target).to_dict())
    return rows


def judge_meta(episode: Episode) -> dict | None:
    judgement = Judgement.objects.filter(episode=episode, latest=True).only("verdict", "reason", "confidence").first()
    if judgement is None:
        return None
    return {"verdict": judgement.verdict or None, "reason": judgement.reason, "confidence": judgement.confidence}


def branch_pair_rows(branch: Episode, views: dict[int, tuple[StepView, int]], history: list[StepView],
                      target: RenderedFor) -> list[dict]:
    """The branch's pair with its parent (:func:`branch_pair`) as a DPO row: the prompt at step k as first sent there
    (the branch's history is the parent's, replayed; no rejection's feedback yet), the better episode's turn at k
    chosen over the other's, both in the target's format."""
    pair = branch_pair(branch)
    if pair is None or pair["index"] not in views:
        return []
    view, before = views[pair["index"]]
    prompt, images = render_prompt(view, history[:before], target)
    chosen, rejected = ((pair["branch_step"], pair["parent_step"]) if pair["chosen"] == "branch"
                        else (pair["parent_step"], pair["branch_step"]))

    def text(step: Step) -> str:
        return render_turn(step_thought(step), Action.from_dict(step.action), target, step.width, step.height)

    step = pair["branch_step"]
    return [DPORow(prompt=prompt, chosen=assistant(text(chosen)), rejected=assistant(text(rejected)), images=images,
                   meta=row_meta(branch, step, pair="branch", differs=Correction.ACTION, parent_episode=branch.parent_id,
                              parent_step_id=pair["parent_step"].pk, chosen_episode=chosen.episode_id,
                              rejected_episode=rejected.episode_id, decided_by=pair["by"]),
                   rendered_for=target).to_dict()]


def grpo_row(step: Step, view: StepView, history: list[StepView], prefix: list[Action], target: RenderedFor,
              episode: Episode) -> dict:
    """A step as GRPO samples answers to it (agent.rows.GRPORow): the prompt it was sent, rendered for ``target``
    (with its screenshots for a checkpoint that reads them), and an env reward that replays ``prefix`` (the episode's
    executed actions before it; void turns ran nothing) on the episode's seed, then runs the answer. The step's own
    answer is not in the row: GRPO scores fresh ones."""
    prompt, images = render_prompt(view, history, target,
                                   feedback=step_feedback(step_rejections(step), step, target))
    reward = GRPORow.env_reward(episode.task.env_kind, episode.task.task_name, episode.seed, prefix,
                                episode.task.definition)
    return GRPORow(messages=prompt, images=images, format=target.action_format, reward=reward, width=step.width,
                   height=step.height, meta=row_meta(episode, step, void=step.void, step_reward=step.reward),
                   rendered_for=target).to_dict()

