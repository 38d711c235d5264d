"""The rollout loop: observe, ask the policy, let a supervisor review, execute, record.

``run_episode`` is used by the Django rollout worker for live episodes (autonomous or supervised)
and by the trainer for evaluation. It never stores anything itself: ``on_step`` receives every
executed (or void) step, and the caller stores it before publishing it.

Supervised mode: each proposal goes to ``supervisor.review`` before it runs, and the decision is
one of ``approve`` (run the proposal), ``edit`` (run the person's corrected turn; the proposal is
kept for DPO), ``reject`` (ask the policy again, with feedback), ``act`` (the person acted
instead), ``finish`` (end the episode now, with the person's outcome).

A reject changes what the model is asked: the next prompt says which proposals of this step were
rejected and why. A greedy policy may still answer the same; then it is asked again, sampling
(``repeat_temperature``), up to ``repeat_retries`` times, and a proposal that still repeats a
rejected one reaches the supervisor as such (``Proposal.repeated``), so a person is told.

Action formats: the policy answers in ``action_format`` (agent/formats); each answer is read with
``agent.formats.parse`` against the screenshot it was given, so every turn the loop handles (and a
supervisor sees, and ``on_step`` receives) is canonical: Loupe's actions in screenshot pixels. Prompts
are rendered in the format too (agent.prompt.render_messages): earlier turns, a person's corrections
among them, and the actions named in rejection feedback. ``with_image`` sends the screenshot, and
``history_images`` the screenshots of that many earlier steps, each with its step's user turn: the very
bytes the step's observation holds, which the caller stores as the step's screenshot.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agent import formats
from agent.actions import Action, Turn, format_turn
from agent.envs.base import Env, EnvError, Observation
from agent.policies.base import Policy, PolicyOutput
from agent.prompt import DEFAULT_STYLE, HistoryStep, action_in_format, render_messages, render_observation

__all__ = ["END_REASONS", "Decision", "EpisodeResult", "RejectedProposal", "StepRecord", "Supervisor",
           "rejection_feedback", "run_episode"]

END_REASONS = ("done", "max_steps", "void_turns", "finished", "env_error", "policy_error", "supervisor_finish",
               "replay_diverged")
DECISION_KINDS = ("approve", "edit", "reject", "act", "finish")
# end reasons before which the task's check never ran: such an episode has no reward
UNCHECKED = ("void_turns", "env_error", "policy_error", "replay_diverged")


@dataclass
class StepRecord:
    """One step as it happened. ``observation`` is the screen the turn was decided on."""

    index: int
    observation: Observation
    prompt: list[dict]
    output: PolicyOutput | None
    turn: Turn
    actor: str  # "model" | "human" | "edited"
    proposal: Turn | None  # the model's proposal when a person overrode it
    reward: float
    done: bool
    info: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)  # ms: observe, policy, execute
    action_format: str = "loupe"  # the format ``output`` was written and read in (replayed steps: loupe)
    feedback: str = ""  # what the model was told at this step besides rejections (a call_user answer)


@dataclass
class RejectedProposal:
    """A proposal a person rejected before it ran: what the model was asked and answered, and why."""

    index: int  # the step it was proposed for
    attempt: int  # 1 for the step's first proposal, 2 for the one after the first reject...
    prompt: list[dict]
    output: PolicyOutput
    turn: Turn
    reason: str
    repeated: bool  # its action is one already rejected at this step
    action_format: str = "loupe"  # the format ``output`` was written and read in


def _same_turn_key(turn: Turn) -> str:
    """What makes two proposals "the same step": the canonical action (a void turn: its raw text)."""
    return turn.action.to_text() if turn.action is not None else "void:" + " ".join(turn.raw.split())


def rejection_feedback(rejected: list[tuple[Turn, str]], action_format: str = "loupe", width: int = 0,
                       height: int = 0) -> str:
    """What the model is told after a person rejected its proposals for this step, with their reasons; the
    actions as the model writes them (``action_format``, on the ``width`` x ``height`` screenshot)."""
    parts = []
    for turn, reason in rejected:
        shown = (action_in_format(turn.action, action_format, width, height) if turn.action is not None
                 else "(an answer that was not an action)")
        parts.append(f"{shown} (reason: {reason.strip()})" if reason.strip() else shown)
    which = "your proposal" if len(parts) == 1 else "your proposals"
    return f"A person rejected {which} {'; '.join(parts)}. Propose a different action."


@dataclass
class Decision:
    kind: str  # "approve" | "edit" | "reject" | "act" | "finish"
    turn: Turn | None = None
    reason: str = ""  # a reject's reason, in the person's words: the model reads it
    outcome: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in DECISION_KINDS:
            raise ValueError(f"unknown decision {self.kind!r}; expected one of: {', '.join(DECISION_KINDS)}")
        if self.kind in ("edit", "act") and (self.turn is None or self.turn.is_void):
            raise ValueError(f"a {self.kind} decision needs a turn with a valid action")


@runtime_checkable
class Supervisor(Protocol):
    def review(self, index: int, observation: Observation, proposal: Turn, *, attempt: int = 1,
               repeated: bool = False) -> Decision:
        """Decide one proposal: the step's ``attempt``-th; ``repeated`` when its action was already rejected."""


@dataclass
class EpisodeResult:
    reward: float
    steps: list[StepRecord]
    end_reason: str
    task: str = ""
    seed: int = 0
    outcome: str | None = None  # a person's outcome on "supervisor_finish"
    error: str | None = None  # on "env_error" / "policy_error"
    # On "supervisor_finish": the task's own check scored the screen the person finished on (``reward``), or could
    # not (a judge or a person decides: ``unscored``; the check failed: ``check_error`` says why).
    unscored: bool = False
    check_error: str | None = None
    # False when the episode ended before the task's check ran (void turns, an env, policy or replay error):
    # ``reward`` is then the loop's default, not a score, and the stored reward is none.
    check_ran: bool = True


def _human_turn(action: Action, thought: str = "") -> Turn:
    return Turn(thought=thought, action=action, void_reason=None, raw=format_turn(thought, action))


def _person_finish(env: Env, end: Callable[..., EpisodeResult], outcome: str | None) -> EpisodeResult:
    """A person ended the episode with ``outcome``: the task's own check scores the screen as it is, as it would
    have had the agent finished there, so the person's word and the check's are both kept."""
    try:
        score = env.evaluate()
    except EnvError as exc:
        return end("supervisor_finish", outcome=outcome, unscored=True, check_error=str(exc))
    if score is None:
        return end("supervisor_finish", outcome=outcome, unscored=True)
    return end("supervisor_finish", reward=float(score), outcome=outcome)


def _checked_end(env: Env, end: Callable[..., EpisodeResult], reason: str) -> EpisodeResult:
    """The episode ran out of steps: the task's check scores the screen as it is (OSWorld evaluates every episode at
    its end), with no answer (an infeasible task's FAIL was not said)."""
    try:
        score = env.evaluate()
    except EnvError as exc:
        return end(reason, unscored=True, check_error=str(exc))
    if score is None:
        return end(reason, unscored=True)
    return end(reason, reward=float(score))


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)


def run_episode(
    env: Env,
    policy: Policy,
    *,
    task: str,
    seed: int,
    max_steps: int,
    max_consecutive_void: int = 3,
    supervisor: Supervisor | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
    replay: list[Action | Turn] | None = None,
    history_window: int = 4,
    with_image: bool = False,
    max_rejections: int = 20,
    on_reject: Callable[[RejectedProposal], None] | None = None,
    repeat_retries: int = 2,
    repeat_temperature: float = 1.0,
    action_format: str = "loupe",
    history_images: int = 0,
    replay_check: Callable[[int, Observation], str | None] | None = None,
    on_replayed: Callable[[StepRecord], None] | None = None,
) -> EpisodeResult:
    """Run one episode to its end and say why it ended (one of ``END_REASONS``).

    ``replay``: actions (or turns) re-executed first on the same seed, without the policy, to
    resume an interrupted episode; their records are returned (actor "human",
    ``info["replayed"]``, void turns skipped) but not passed to ``on_step``, since the caller
    stored them the first time; they count towards ``max_steps``. ``with_image`` attaches
    the screenshot to the prompt (for multimodal servers), and with it ``history_images`` the
    screenshots of up to that many earlier steps. ``action_format`` is the format the policy
    answers in (see the module docstring). A supervisor may also offer
    ``answer_call_user(index, question) -> str | None``; its answer reaches the next prompt.
    ``on_reject`` receives every proposal a supervisor rejected (the caller stores it).

    ``replay_check(position, observation)`` (a branch, which must reach the very state its parent was in) is
    asked before each replayed action (``position``: how many were replayed before it) and once more after the
    last; a non-empty answer says what differs, and the episode ends "replay_diverged" with it as ``error``
    before anything else runs. ``on_replayed`` receives each replayed record (a branch stores them; a resumed
    episode had stored them already).
    """
    formats.check_format(action_format)
    if isinstance(history_images, bool) or not isinstance(history_images, int) or history_images < 0:
        raise ValueError(f"history_images must be a whole number >= 0, got {history_images!r}")
    steps: list[StepRecord] = []
    history: list[HistoryStep] = []
    screenshots: list[bytes] = []  # history's screenshots, one a step
    style = getattr(policy, "prompt_style", DEFAULT_STYLE)  # the prompt style the policy's model was trained on

    def remember(observation: Observation, observation_text: str, turn: Turn) -> None:
        history.append(HistoryStep(observation_text, turn, observation.width, observation.height))
        screenshots.append(observation.screenshot)

    def end(reason: str, reward: float = 0.0, **extra: str | bool | None) -> EpisodeResult:
        if reason in UNCHECKED:
            extra.setdefault("check_ran", False)
        return EpisodeResult(reward=reward, steps=steps, end_reason=reason, task=task, seed=seed, **extra)

    try:
        observation = env.reset(task, seed)
    except EnvError as exc:
        return end("env_error", error=str(exc))

    for item in replay or []:
        turn = item if isinstance(item, Turn) else _human_turn(item)
        if turn.action is None:
            continue  # a void turn changed nothing on the screen
        difference = replay_check(len(steps), observation) if replay_check else None
        if difference:
            return end("replay_diverged", error=difference)
        started = time.perf_counter()
        try:
            result = env.step(turn.action)
        except EnvError as exc:
            return end("env_error", error=f"while replaying step {len(steps) + 1}: {exc}")
        steps.append(StepRecord(
            index=len(steps), observation=observation, prompt=[], output=None, turn=turn, actor="human",
            proposal=None, reward=result.reward, done=result.done, info={**result.info, "replayed": True},
            timings={"observe": 0.0, "policy": 0.0, "execute": _ms(started)},
        ))
        if on_replayed:
            on_replayed(steps[-1])
        remember(observation, render_observation(observation, style), turn)
        observation = result.observation
        if result.done:
            return end("finished" if turn.action.name == "finished" else "done", reward=result.reward)
    difference = replay_check(len(steps), observation) if replay_check else None
    if difference:
        return end("replay_diverged", error=difference)

    consecutive_void = 0
    feedback: str | None = None
    while len(steps) < max_steps:
        index = len(steps)
        started = time.perf_counter()
        observation_text = render_observation(observation, style)
        earlier = screenshots[len(screenshots) - history_images:] if history_images else []
        images = [*earlier, observation.screenshot] if with_image else None
        observe_ms = _ms(started)
        policy_ms = 0.0
        rejected: list[tuple[Turn, str]] = []  # this step's proposals a person turned down, with why
        while True:
            rejects = (rejection_feedback(rejected, action_format, observation.width, observation.height)
                       if rejected else None)
            told = " ".join(part for part in (feedback, rejects) if part)
            prompt = render_messages(
                instruction=observation.instruction, observation_text=observation_text, history=history,
                images=images, history_window=history_window, feedback=told or None, style=style,
                action_format=action_format,
            )
            rejected_keys = {_same_turn_key(turn) for turn, _ in rejected}
            for retry in range(1 + (repeat_retries if rejected else 0)):
                asked = time.perf_counter()
                output = policy.act(prompt, temperature=repeat_temperature if retry else None)
                policy_ms += _ms(asked)
                if output.error is not None:
                    return end("policy_error", error=output.error)
                proposal = formats.parse(output.text, format=action_format, width=observation.width,
                                         height=observation.height)
                repeated = _same_turn_key(proposal) in rejected_keys
                if not repeated:
                    break
            attempt = len(rejected) + 1
            decision = (supervisor.review(index, observation, proposal, attempt=attempt, repeated=repeated)
                        if supervisor else Decision("approve"))
            if decision.kind != "reject":
                break
            rejected.append((proposal, decision.reason))
            if on_reject:
                on_reject(RejectedProposal(index=index, attempt=attempt, prompt=prompt, output=output,
                                           turn=proposal, reason=decision.reason, repeated=repeated,
                                           action_format=action_format))
            if len(rejected) >= max_rejections:
                return end("supervisor_finish", outcome="rejected_too_often")
        told_before, feedback = feedback or "", None

        if decision.kind == "finish":
            return _person_finish(env, end, decision.outcome)
        if decision.kind == "approve":
            turn, actor, overridden = proposal, "model", None
        else:
            assert decision.turn is not None  # checked by Decision
            turn, actor, overridden = decision.turn, ("edited" if decision.kind == "edit" else "human"), proposal
        info: dict = {"rejections": len(rejected)} if rejected else {}
        timings = {"observe": observe_ms, "policy": policy_ms, "execute": 0.0}

        if turn.is_void:
            consecutive_void += 1
            record = StepRecord(index=index, observation=observation, prompt=prompt, output=output, turn=turn,
                                actor=actor, proposal=overridden, reward=0.0, done=False,
                                info={**info, "void": turn.void_reason}, timings=timings,
                                action_format=action_format, feedback=told_before)
            steps.append(record)
            if on_step:
                on_step(record)
            remember(observation, observation_text, turn)
            if consecutive_void >= max_consecutive_void:
                return end("void_turns")
            continue

        consecutive_void = 0
        assert turn.action is not None
        executed = time.perf_counter()
        try:
            result = env.step(turn.action)
        except EnvError as exc:
            return end("env_error", error=str(exc))
        timings["execute"] = _ms(executed)
        record = StepRecord(index=index, observation=observation, prompt=prompt, output=output, turn=turn,
                            actor=actor, proposal=overridden, reward=result.reward, done=result.done,
                            info={**info, **result.info}, timings=timings, action_format=action_format,
                            feedback=told_before)
        steps.append(record)
        if on_step:
            on_step(record)
        remember(observation, observation_text, turn)
        observation = result.observation
        if turn.action.name == "finished":
            return end("finished", reward=result.reward)
        if result.done:
            return end("done", reward=result.reward)
        if turn.action.name == "call_user":
            answer_fn = getattr(supervisor, "answer_call_user", None)
            answer = answer_fn(index, turn.action.args["question"]) if callable(answer_fn) else None
            feedback = f"The user answered: {answer}" if answer else "No one answered; continue on your own."
    return _checked_end(env, end, "max_steps")
