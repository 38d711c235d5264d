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

from agent import formats
from agent.actions import Action, Turn, format_turn
from agent.envs.base import Env, EnvError, Observation
from agent.confidence import Confidence
from agent.policies.base import Policy, PolicyOutput
from agent.prompt import DEFAULT_STYLE, HistoryStep, action_in_format, render_messages, render_observation

__all__ = ["END_REASONS", "Decision", "EpisodeResult", "RejectedProposal", "StepRecord", "Supervisor", "human_turn",
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
    confidence: Confidence | None = None  # how sure the policy was of its proposal's action (agent.confidence)


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
    confidence: Confidence | None = None


def _same_turn_key(turn: Turn) -> str:
    """What makes two proposals "the same step": the canonical action (a void turn: its raw text)."""
    return turn.action.to_text() if turn.action is not None else "void:" + " ".join(turn.raw.split())


def rejection_feedback(rejected: list[tuple[Turn, str]], action_format: str = "loupe", width: int = 0,
                       height: int = 0, pixels: dict | None = None) -> str:
    """What the model is told after a person rejected its proposals for this step, with their reasons; the
    actions as the model writes them (``action_format``, on the ``width`` x ``height`` screenshot; ``pixels``: the
    served processor's limits, RolloutConfig's)."""
    parts = []
    for turn, reason in rejected:
        shown = (action_in_format(turn.action, action_format, width, height, pixels) if turn.action is not None
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


class Supervisor:
    """Every hook the loop calls on a supervisor, each with its null default: a loop without a supervisor runs with
    this one (every proposal approved, no call_user answered). A supervisor overrides the hooks it decides."""

    def watch_env(self, env: Env) -> None:
        """The env the episode is about to run in (a live view streams its screen while a person decides)."""

    def review(self, index: int, observation: Observation, proposal: Turn, *, attempt: int = 1,
               repeated: bool = False, confidence: Confidence | None = None) -> Decision:
        """Decide one proposal for step ``index``: the step's ``attempt``-th; ``repeated`` when its action was
        already rejected at this step; ``confidence``: how sure the policy was of it (None: its backend gave no
        logprobs), which a supervisor may ask a person below."""
        return Decision("approve")

    def answer_call_user(self, index: int, question: str) -> str | None:
        """What a person answered the model's ``call_user`` at step ``index``; None: no one did."""
        return None


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


def human_turn(action: Action, thought: str = "") -> Turn:
    """A person's turn (or a stored one replayed): their action and thought, written as Loupe's grammar."""
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


@dataclass(frozen=True)
class RolloutConfig:
    """How the loop prompts the policy and how long it goes on: run_episode's settings, checked once."""

    max_steps: int
    max_consecutive_void: int = 3  # void turns in a row that end the episode
    history_window: int = 4  # earlier turns the prompt shows
    with_image: bool = False  # the screenshot goes with the prompt (for multimodal servers)
    history_images: int = 0  # ... and the screenshots of that many earlier steps
    action_format: str = "loupe"  # the format the policy answers in (agent/formats)
    max_rejections: int = 20  # a step's rejections that end the episode
    repeat_retries: int = 2  # asks again, sampling, when a proposal repeats a rejected one
    repeat_temperature: float = 1.0
    # the served checkpoint's image processor limits, {"min_pixels", "max_pixels"} (agent.formats.pixel_limits): the
    # grid a format that points on the resized image (uitars) is read and written on; empty: the format's defaults
    pixels: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        formats.check_format(self.action_format)
        if not isinstance(self.pixels, dict) or set(self.pixels) - {"min_pixels", "max_pixels"}:
            raise ValueError(f"pixels takes min_pixels and max_pixels, got {self.pixels!r}")
        formats.check_pixels(self.pixels.get("min_pixels"), self.pixels.get("max_pixels"))
        if isinstance(self.history_images, bool) or not isinstance(self.history_images, int) or self.history_images < 0:
            raise ValueError(f"history_images must be a whole number >= 0, got {self.history_images!r}")


@dataclass
class _Proposed:
    """A step's proposal as the supervisor decided it, with what the policy was asked and how long it took."""

    prompt: list[dict]
    output: PolicyOutput
    proposal: Turn
    decision: Decision
    rejections: int
    observation_text: str
    timings: dict
    confidence: Confidence | None = None


class _Episode:
    """One episode's loop: the steps so far, and the history and screenshots the next prompt shows."""

    def __init__(self, env: Env, policy: Policy, config: RolloutConfig, *, task: str, seed: int,
                 supervisor: Supervisor, on_step: Callable[[StepRecord], None] | None,
                 on_reject: Callable[[RejectedProposal], None] | None) -> None:
        self.env, self.policy, self.config, self.task, self.seed = env, policy, config, task, seed
        self.supervisor, self.on_step, self.on_reject = supervisor, on_step, on_reject
        self.style = getattr(policy, "prompt_style", DEFAULT_STYLE)  # the prompt style its model was trained on
        self.steps: list[StepRecord] = []
        self.history: list[HistoryStep] = []
        self.screenshots: list[bytes] = []  # history's screenshots, one a step
        self.consecutive_void = 0

    def end(self, reason: str, reward: float = 0.0, **extra: str | bool | None) -> EpisodeResult:
        if reason in UNCHECKED:
            extra.setdefault("check_ran", False)
        return EpisodeResult(reward=reward, steps=self.steps, end_reason=reason, task=self.task, seed=self.seed,
                             **extra)

    def remember(self, observation: Observation, observation_text: str, turn: Turn) -> None:
        self.history.append(HistoryStep(observation_text, turn, observation.width, observation.height))
        self.screenshots.append(observation.screenshot)

    def replay(self, observation: Observation, replay: list[Action | Turn],
               check: Callable[[int, Observation], str | None] | None,
               on_replayed: Callable[[StepRecord], None] | None) -> Observation | EpisodeResult:
        """Execute ``replay`` without the policy; the screen after it, or how the episode ended on the way."""
        for item in replay:
            turn = item if isinstance(item, Turn) else human_turn(item)
            if turn.action is None:
                continue  # a void turn changed nothing on the screen
            difference = check(len(self.steps), observation) if check else None
            if difference:
                return self.end("replay_diverged", error=difference)
            started = time.perf_counter()
            try:
                result = self.env.step(turn.action)
            except EnvError as exc:
                return self.end("env_error", error=f"while replaying step {len(self.steps) + 1}: {exc}")
            self.steps.append(StepRecord(
                index=len(self.steps), observation=observation, prompt=[], output=None, turn=turn, actor="human",
                proposal=None, reward=result.reward, done=result.done, info={**result.info, "replayed": True},
                timings={"observe": 0.0, "policy": 0.0, "execute": _ms(started)},
            ))
            if on_replayed:
                on_replayed(self.steps[-1])
            self.remember(observation, render_observation(observation, self.style), turn)
            observation = result.observation
            if result.done:
                return self.end("finished" if turn.action.name == "finished" else "done", reward=result.reward)
        difference = check(len(self.steps), observation) if check else None
        return self.end("replay_diverged", error=difference) if difference else observation

    def propose(self, index: int, observation: Observation, feedback: str | None) -> _Proposed | EpisodeResult:
        """Ask the policy for step ``index`` until the supervisor takes a proposal (or a turn of its own); a reject
        asks again, the prompt saying what was rejected and why."""
        config, started = self.config, time.perf_counter()
        observation_text = render_observation(observation, self.style)
        earlier = self.screenshots[len(self.screenshots) - config.history_images:] if config.history_images else []
        images = [*earlier, observation.screenshot] if config.with_image else None
        timings = {"observe": _ms(started), "policy": 0.0, "execute": 0.0}
        rejected: list[tuple[Turn, str]] = []  # this step's proposals a person turned down, with why
        while True:
            rejects = (rejection_feedback(rejected, config.action_format, observation.width, observation.height,
                                          config.pixels) if rejected else None)
            told = " ".join(part for part in (feedback, rejects) if part)
            prompt = render_messages(
                instruction=observation.instruction, observation_text=observation_text, history=self.history,
                images=images, history_window=config.history_window, feedback=told or None, style=self.style,
                action_format=config.action_format, pixels=config.pixels,
            )
            rejected_keys = {_same_turn_key(turn) for turn, _ in rejected}
            for retry in range(1 + (config.repeat_retries if rejected else 0)):
                asked = time.perf_counter()
                output = self.policy.act(prompt, temperature=config.repeat_temperature if retry else None)
                timings["policy"] += _ms(asked)
                if output.error is not None:
                    return self.end("policy_error", error=output.error)
                proposal = formats.parse(output.text, format=config.action_format, width=observation.width,
                                         height=observation.height, **config.pixels)
                repeated = _same_turn_key(proposal) in rejected_keys
                if not repeated:
                    break
            attempt = len(rejected) + 1
            confidence = output.confidence() if not proposal.is_void else None
            decision = self.supervisor.review(index, observation, proposal, attempt=attempt, repeated=repeated,
                                              confidence=confidence)
            if decision.kind != "reject":
                return _Proposed(prompt=prompt, output=output, proposal=proposal, decision=decision,
                                 rejections=len(rejected), observation_text=observation_text, timings=timings,
                                 confidence=confidence)
            rejected.append((proposal, decision.reason))
            if self.on_reject:
                self.on_reject(RejectedProposal(index=index, attempt=attempt, prompt=prompt, output=output,
                                                turn=proposal, reason=decision.reason, repeated=repeated,
                                                action_format=config.action_format, confidence=confidence))
            if len(rejected) >= config.max_rejections:
                return self.end("supervisor_finish", outcome="rejected_too_often")

    def execute(self, index: int, observation: Observation, proposed: _Proposed,
                told: str) -> tuple[Observation, str | None] | EpisodeResult:
        """Run the decided turn of step ``index`` and record it; the next screen and what the model is told next
        (a call_user's answer), or how the episode ended. ``told``: what this step's prompt was told."""
        decision, proposal = proposed.decision, proposed.proposal
        if decision.kind == "approve":
            turn, actor, overridden = proposal, "model", None
        else:
            assert decision.turn is not None  # checked by Decision
            turn, actor, overridden = decision.turn, ("edited" if decision.kind == "edit" else "human"), proposal
        info: dict = {"rejections": proposed.rejections} if proposed.rejections else {}
        timings = proposed.timings
        result = None
        if turn.is_void:
            self.consecutive_void += 1
            info["void"] = turn.void_reason
        else:
            self.consecutive_void = 0
            assert turn.action is not None
            executed = time.perf_counter()
            try:
                result = self.env.step(turn.action)
            except EnvError as exc:
                return self.end("env_error", error=str(exc))
            timings["execute"] = _ms(executed)
            info.update(result.info)
        record = StepRecord(index=index, observation=observation, prompt=proposed.prompt, output=proposed.output,
                            turn=turn, actor=actor, proposal=overridden, reward=result.reward if result else 0.0,
                            done=result.done if result else False, info=info, timings=timings,
                            action_format=self.config.action_format, feedback=told,
                            confidence=proposed.confidence)
        self.steps.append(record)
        if self.on_step:
            self.on_step(record)
        self.remember(observation, proposed.observation_text, turn)
        if result is None:
            return self.end("void_turns") if self.consecutive_void >= self.config.max_consecutive_void \
                else (observation, None)
        if turn.action.name == "finished":
            return self.end("finished", reward=result.reward)
        if result.done:
            return self.end("done", reward=result.reward)
        if turn.action.name == "call_user":
            answer = self.supervisor.answer_call_user(index, turn.action.args["question"])
            return result.observation, (f"The user answered: {answer}" if answer
                                        else "No one answered; continue on your own.")
        return result.observation, None


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
    start_index: int | None = None,
    pixels: dict | None = None,
) -> EpisodeResult:
    """Run one episode to its end and say why it ended (one of ``END_REASONS``).

    ``replay``: actions (or turns) re-executed first on the same seed, without the policy, to
    resume an interrupted episode; their records are returned (actor "human",
    ``info["replayed"]``, void turns skipped, indexed by their place in the replay) but not passed to
    ``on_step``, since the caller stored them the first time; they count towards ``max_steps``.
    ``start_index``: the index of the first step after the replay, as the caller stores it (a resumed episode's
    stored void steps are not replayed, so it may be past the replayed count, the default); every new step, its
    rejected proposals and the supervisor's hooks are told indices from there. The settings (``max_steps`` to
    ``history_images``, and ``pixels``) are :class:`RolloutConfig`'s. ``supervisor``: see :class:`Supervisor`; ``on_reject``
    receives every proposal a supervisor rejected (the caller stores it).

    ``replay_check(position, observation)`` (a branch, which must reach the very state its parent was in) is
    asked before each replayed action (``position``: how many were replayed before it) and once more after the
    last; a non-empty answer says what differs, and the episode ends "replay_diverged" with it as ``error``
    before anything else runs. ``on_replayed`` receives each replayed record (a branch stores them; a resumed
    episode had stored them already).
    """
    config = RolloutConfig(max_steps=max_steps, max_consecutive_void=max_consecutive_void,
                           history_window=history_window, with_image=with_image, history_images=history_images,
                           action_format=action_format, max_rejections=max_rejections, repeat_retries=repeat_retries,
                           repeat_temperature=repeat_temperature, pixels=pixels or {})
    replay = replay or []
    replayed = sum(1 for item in replay if (item.action if isinstance(item, Turn) else item) is not None)
    if start_index is not None and start_index < replayed:
        raise ValueError(f"start_index {start_index} is before the end of the replay ({replayed} steps)")
    supervisor = supervisor or Supervisor()
    episode = _Episode(env, policy, config, task=task, seed=seed, supervisor=supervisor, on_step=on_step,
                       on_reject=on_reject)
    supervisor.watch_env(env)
    try:
        observation = env.reset(task, seed)
    except EnvError as exc:
        return episode.end("env_error", error=str(exc))
    observation = episode.replay(observation, replay, replay_check, on_replayed)
    if isinstance(observation, EpisodeResult):
        return observation
    offset = (start_index - len(episode.steps)) if start_index is not None else 0  # stored void steps not replayed
    feedback: str | None = None  # what the model is told at the next step (a call_user's answer)
    while len(episode.steps) < config.max_steps:
        index = len(episode.steps) + offset
        proposed = episode.propose(index, observation, feedback)
        if isinstance(proposed, EpisodeResult):
            return proposed
        if proposed.decision.kind == "finish":
            return _person_finish(env, episode.end, proposed.decision.outcome)
        step = episode.execute(index, observation, proposed, told=feedback or "")
        if isinstance(step, EpisodeResult):
            return step
        observation, feedback = step
    return _checked_end(env, episode.end, "max_steps")
