"""How GRPO scores a sampled answer to a step row (trainer/grpo.py): rule rewards on real outcomes, as UI-R1 / GUI-R1
score GUI actions. A row's ``reward`` is one of two kinds (``REWARD_KINDS``):

- ``{"kind": "action", "action": "click(x=40, y=50)", "box": [left, top, right, bottom]}``: the action a person or a
  successful episode took there. An answer scores 1 when it is the same kind of action and, for a pointer action
  (click, double_click, right_click; drag with an ``end_box`` for its end; scroll when a box is given), its point
  falls inside the box (or ``"element": {"x", "y", "width", "height"}``: centre and size, as observations give them);
  typed text, hotkeys and finished answers must be equal after whitespace normalisation (keys also case-folded);
  otherwise 0.
- ``{"kind": "env", "env": "miniwob", "task": "click-button", "seed": 3, "prefix": ["click(x=..., y=...)"]}``: the
  real environment is reset on the seed, the prefix (canonical actions) replayed, the answer executed, and the env's
  reward is the answer's (an authored task's reward also carries its JSON, ``"definition"``, which the env learns
  first). One environment of each kind per trainer process, reused (:class:`Envs`); an answer the env fails to run
  scores 0 and is counted (``env_failures``), never raised. Each env task is started once before training, so an env
  that cannot start stops the run at once with exit status 2.

An answer its format cannot read (a void turn) scores ``void_reward`` (default -0.1), just under a readable wrong
answer: one that can be executed and corrected is worth more than one that cannot, and in a group where nothing is
right (early on, a small model's usual case) this small gap is the only signal there is, which group normalisation
turns into a full-size advantage toward readable answers. A separate format reward would only shift every readable
answer by the same amount, the same thing under group normalisation, so there is none.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Any

from agent import formats
from agent.actions import Action, ActionSyntaxError, parse_action
from agent.envs import Env, EnvError, add_authored_task, make_env
from trainer import distributed
from trainer.model import TrainerError

__all__ = ["REWARD_KINDS", "ActionReward", "AnswerReward", "Box", "EnvReward", "Envs", "Step"]

log = logging.getLogger("trainer")


POINTER = ("click", "double_click", "right_click")  # judged by where they point; drag and scroll apart


def _normal(text: str) -> str:
    return " ".join(text.split())


def _keys(keys: str) -> str:
    return "".join(keys.split()).lower()


@dataclass(frozen=True)
class Box:
    """A target region in screenshot pixels, edges included."""

    left: float
    top: float
    right: float
    bottom: float

    def contains(self, x: float, y: float) -> bool:
        return self.left <= x <= self.right and self.top <= y <= self.bottom

    @classmethod
    def read(cls, spec: Any, where: str) -> Box:
        """``[left, top, right, bottom]`` or an element's ``{"x", "y", "width", "height"}`` (centre and size)."""
        if isinstance(spec, dict):
            missing = [k for k in ("x", "y", "width", "height") if not _is_number(spec.get(k))]
            if missing:
                raise TrainerError(f"{where}: an element needs numbers x, y (its centre), width and height; "
                                   f"missing or not numbers: {missing}")
            half_w, half_h = spec["width"] / 2, spec["height"] / 2
            spec = [spec["x"] - half_w, spec["y"] - half_h, spec["x"] + half_w, spec["y"] + half_h]
        if not (isinstance(spec, list) and len(spec) == 4 and all(map(_is_number, spec))):
            raise TrainerError(f"{where}: a box is [left, top, right, bottom] in screenshot pixels, got {spec!r}")
        box = cls(*map(float, spec))
        if box.left > box.right or box.top > box.bottom:
            raise TrainerError(f"{where}: the box {spec} has left > right or top > bottom")
        return box


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _action(text: Any, where: str) -> Action:
    try:
        return parse_action(text)
    except ActionSyntaxError as exc:
        raise TrainerError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class ActionReward:
    """1 when the answer does what the row's action did (same kind, point in the target, same text), else 0."""

    action: Action
    box: Box | None
    end_box: Box | None

    @classmethod
    def read(cls, spec: dict, where: str) -> ActionReward:
        action = _action(spec.get("action"), f"{where}: action")
        target = spec.get("box", spec.get("element"))
        box = Box.read(target, f"{where}: box") if target is not None else None
        end_box = Box.read(spec["end_box"], f"{where}: end_box") if spec.get("end_box") is not None else None
        if action.name in (*POINTER, "drag") and box is None:
            raise TrainerError(f"{where}: a {action.name} is judged by where it points: give its target as 'box' "
                               "[left, top, right, bottom] or 'element' {x, y, width, height}")
        if action.name == "drag" and end_box is None:
            raise TrainerError(f"{where}: a drag needs 'end_box' too, the region its end must fall in")
        return cls(action, box, end_box)

    def score(self, answer: Action, envs: Envs) -> float:
        want, a = self.action, answer.args
        if answer.name != want.name:
            return 0.0
        if answer.name in POINTER:
            return float(self.box.contains(a["x"], a["y"]))
        if answer.name == "drag":
            return float(self.box.contains(a["x1"], a["y1"]) and self.end_box.contains(a["x2"], a["y2"]))
        if answer.name == "scroll":
            inside = self.box is None or self.box.contains(a["x"], a["y"])
            return float(a["direction"] == want.args["direction"] and inside)
        if answer.name == "type":
            return float(_normal(a["text"]) == _normal(want.args["text"]))
        if answer.name == "hotkey":
            return float(_keys(a["keys"]) == _keys(want.args["keys"]))
        if answer.name == "finished":
            return float(_normal(a["answer"]) == _normal(want.args["answer"]))
        return 1.0  # wait, call_user: the kind is the whole action


@dataclass(frozen=True)
class EnvReward:
    """The env's reward for the answer, executed after the prefix on the seeded episode."""

    env: str
    task: str
    seed: int
    prefix: tuple[Action, ...]
    definition: dict | None = dataclasses.field(default=None, compare=False)  # an authored task's JSON

    @classmethod
    def read(cls, spec: dict, where: str) -> EnvReward:
        env, task, seed, prefix = spec.get("env"), spec.get("task"), spec.get("seed"), spec.get("prefix", [])
        definition = spec.get("definition")
        if definition is not None and not isinstance(definition, dict):
            raise TrainerError(f"{where}: an env reward's 'definition' is the task's JSON (an object), got "
                               f"{type(definition).__name__}")
        if not isinstance(env, str) or not env:
            raise TrainerError(f"{where}: an env reward names its 'env' (e.g. \"miniwob\")")
        if not isinstance(task, str) or not task:
            raise TrainerError(f"{where}: an env reward names its 'task' (e.g. \"click-button\")")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TrainerError(f"{where}: an env reward needs a whole-number 'seed', got {seed!r}")
        if not isinstance(prefix, list):
            raise TrainerError(f"{where}: 'prefix' is a list of canonical actions, e.g. [\"click(x=1, y=2)\"]")
        return cls(env, task, seed, tuple(_action(a, f"{where}: prefix[{i}]") for i, a in enumerate(prefix)),
                   definition)

    def score(self, answer: Action, envs: Envs) -> float:
        return envs.run(self, answer)


REWARD_KINDS: dict[str, type] = {"action": ActionReward, "env": EnvReward}


@dataclass(frozen=True)
class Step:
    """What an answer to one row is read and scored by."""

    format: str
    width: int
    height: int
    reward: ActionReward | EnvReward
    where: str  # file:line of the row, for errors


class Envs:
    """The environments of this trainer process, one of each kind, reused from answer to answer (Playwright's sync
    API keeps an env on the thread that made it: TRL calls reward functions on the training thread)."""

    def __init__(self) -> None:
        self._envs: dict[str, Env] = {}
        self._authored: dict[tuple[str, str], dict] = {}  # (kind, task) -> the JSON its env learnt
        self.steps = self.episodes = self.failures = 0

    def get(self, kind: str) -> Env:
        if kind not in self._envs:
            # MiniWoB restarts a seeded episode inside the loaded page (its own harness's way, ~10 ms a reset
            # instead of a page load; the same episode either way)
            self._envs[kind] = make_env(kind, **({"fresh_context": False} if kind == "miniwob" else {}))
        return self._envs[kind]

    def for_task(self, spec: EnvReward) -> Env:
        """The env of ``spec``'s kind, knowing its task: an authored one's JSON is handed over as the rollout worker
        does (agent.envs.add_authored_task), once, and again only when another row gives other JSON for the name."""
        env = self.get(spec.env)
        if spec.definition is not None and self._authored.get((spec.env, spec.task)) != spec.definition:
            added = add_authored_task(env, spec.definition)
            if added != spec.task:
                raise EnvError(f"the reward's definition is of the task {added!r}, not {spec.task!r}")
            self._authored[(spec.env, spec.task)] = spec.definition
        return env

    def probe(self, spec: EnvReward, where: str) -> None:
        """Start the env on ``spec``'s task once; one that cannot start is the run's error, not a zero reward."""
        try:
            self.for_task(spec).reset(spec.task, spec.seed)
        except (ValueError, EnvError) as exc:
            raise TrainerError(f"{where}: the {spec.env} env cannot start {spec.task} (seed {spec.seed}): {exc}") \
                from None

    def run(self, spec: EnvReward, answer: Action) -> float:
        try:
            env = self.for_task(spec)
            env.reset(spec.task, spec.seed)
            self.episodes += 1
            for action in spec.prefix:
                self.steps += 1
                if env.step(action).done:
                    raise EnvError(f"the episode ended during the prefix, at {action.to_text()}")
            self.steps += 1
            return float(env.step(answer).reward)
        except (ValueError, EnvError) as exc:
            self.failures += 1
            log.warning("env reward: %s seed %d, answer %s: %s; scored 0", spec.task, spec.seed, answer.to_text(), exc)
            return 0.0

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()
        self._authored.clear()


class AnswerReward:
    """TRL's reward function: reads each sampled answer in its row's format and scores it by the row's reward.
    Counts the answers, the void ones and those rewarded above 0 (metrics.json); logs each batch's share of void
    answers as ``void``."""

    __name__ = "answer"  # TRL names the reward's metrics after it

    def __init__(self, steps: dict[int, Step], void_reward: float, envs: Envs, pixels: dict | None = None) -> None:
        self.steps, self.void_reward, self.envs = steps, void_reward, envs
        self.pixels = pixels or {}  # the init's image processor's limits: the grid a resizing format's points are on
        self.answers = self.void = self.rewarded = 0
        self.trace = distributed.Trace()  # $LOUPE_TRAINER_TRACE: the rows this rank's answers replied to
        self.generations = 0

    def counts(self) -> dict[str, int]:
        """The answers of every rank: what this rank scored, summed over the processes of the run."""
        return distributed.summed({"answers": self.answers, "void": self.void, "rewarded": self.rewarded,
                                   "env_episodes": self.envs.episodes, "env_steps": self.envs.steps,
                                   "env_failures": self.envs.failures})

    def score(self, text: str, step: Step) -> tuple[float, bool]:
        """(reward, void) of one answer."""
        turn = formats.parse(text, format=step.format, width=step.width, height=step.height, **self.pixels)
        if turn.is_void:
            return self.void_reward, True
        return step.reward.score(turn.action, self.envs), False

    def __call__(self, prompts: list, completions: list, row: list[int], log_metric=None, **_: Any) -> list[float]:
        rewards, void = [], 0
        for completion, index in zip(completions, row, strict=True):
            text = completion[-1]["content"] if isinstance(completion, list) else completion
            reward, is_void = self.score(text, self.steps[index])
            rewards.append(reward)
            void += is_void
        self.answers += len(rewards)
        self.void += void
        self.rewarded += sum(r > 0 for r in rewards)
        self.generations += 1
        self.trace.write({"generation": self.generations, "rows": list(row)})
        if log_metric is not None:
            log_metric("void", void / max(len(rewards), 1))
        return rewards
