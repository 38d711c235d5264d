"""Cold-start demonstrations: agent's scripted solvers act in the real environment.

Each step of a solved episode becomes one SFT row (agent.rows, rendered for a text model of the
chosen prompt style answering in Loupe's grammar): the exact messages the policy would be shown at that
step (rendered by agent.prompt, the one prompt renderer) followed by the solver's turn as the
assistant message. Only episodes the environment rewards are kept (unless ``keep_failed``),
so a row never teaches a turn that did not work.

``augment`` adds synthetic variants of one-step episodes (the cheap way to give a tiny model
enough examples when the browser is slow): the observation's element coordinates are re-drawn
inside the screen and, where the instruction quotes an element's text, the target is swapped to
another element of the same role; the same solver then decides on the variant, so the label is
still the solver's (it decides only from the observation), just not checked by the env.

``relabel`` makes a share of those variants speak another vocabulary: every word of the elements and of
the instruction's quotes is replaced, consistently, by a random word of the tiny tokenizer. A model
then cannot guess the target's name from the few names a task uses (``Submit``, ``Yes``...), it can
only copy it from the instruction; without this the tiny model learned the names' frequencies and
never looked at the instruction at all.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import random
import re
from pathlib import Path

from agent.actions import Turn, format_turn
from agent.envs import make_env
from agent.prompt import QUOTED_TEXT, render_element
from agent.rows import RenderedFor, SFTRow, StepView, render_prompt, render_turn
from agent.solvers import SolverError, solve_step
from trainer.configs import DemosConfig, parse_seeds, parse_tasks
from trainer.model import TINY_PROMPT_STYLE, TrainerError
from trainer.optim import Timer, emit
from trainer.tokenizer import read_merges

log = logging.getLogger("trainer")


def quoting_target(turn, observation, style: str):
    """``turn`` whose thought ends by quoting the line of the element its click lands on, e.g.
    ``... I click it. [link] "sed." x=33, y=102`` (unchanged when no element is centred there).

    The action then copies numbers the thought has just written, and the thought copies a line of
    the prompt that starts with the word the instruction names: two copies a tiny model learns
    (matching a prefix, then taking what follows it), where picking the coordinates of the right
    element straight from the screen was a lookup it did not learn in ten minutes.
    """
    action = turn.action
    if action is None or "x" not in action.args or "y" not in action.args:
        return turn
    at = [e for e in observation.elements if (e.x, e.y) == (action.args["x"], action.args["y"])]
    if len(at) != 1:
        return turn
    thought = f"{turn.thought.strip()} {render_element(at[0], style)}"
    return Turn(thought=thought, action=action, void_reason=None, raw=format_turn(thought, action))


def _view(observation, turn=None):
    """``observation`` (and the turn that ran on it) as agent.rows renders a step."""
    return StepView(instruction=observation.instruction, url=observation.url, elements=observation.elements,
                    width=observation.width, height=observation.height, screen_text=observation.screen_text,
                    thought=turn.thought if turn else "", action=turn.action if turn else None,
                    raw=turn.raw if turn else "")


def demo_row(task: str, observation, history: list, turns: list, meta: dict,
             style: str = TINY_PROMPT_STYLE, quote_target: bool = False):
    """(SFT row, solver turn, step view) for one step: the prompt the policy would see after ``history`` (the
    earlier steps' views), then the turn; an agent.rows SFT row rendered for a text model of ``style`` answering in
    Loupe's grammar."""
    turn = solve_step(task, observation, turns)
    if quote_target:
        turn = quoting_target(turn, observation, style)
    target = RenderedFor(style=style)
    messages, images = render_prompt(_view(observation), history, target)
    answer = render_turn(turn.thought, turn.action, target, observation.width, observation.height, raw=turn.raw)
    row = SFTRow(messages=[*messages, {"role": "assistant", "content": answer}], images=images, meta=meta,
                 rendered_for=target).to_dict()
    return row, turn, _view(observation, turn)


def augment_observation(observation, rng: random.Random):
    """A synthetic variant of a one-step observation: new element centres, maybe another target."""
    elements = []
    for element in observation.elements:
        half_w = max(1, min(element.width, observation.width) // 2)
        half_h = max(1, min(element.height, observation.height) // 2)
        x = rng.randint(half_w, max(half_w, observation.width - half_w - 1))
        y = rng.randint(half_h, max(half_h, observation.height - half_h - 1))
        elements.append(dataclasses.replace(element, x=x, y=y))
    instruction = observation.instruction
    quoted = QUOTED_TEXT.findall(instruction)
    if quoted:
        target = quoted[0]
        roles = {e.role for e in observation.elements if e.text.strip() == target}
        others = sorted({e.text.strip() for e in observation.elements
                         if e.role in roles and e.text.strip() and e.text.strip() != target and '"' not in e.text})
        if others and rng.random() < 0.5:
            instruction = instruction.replace(f'"{target}"', f'"{rng.choice(others)}"', 1)
    return dataclasses.replace(observation, instruction=instruction, elements=elements)


def demo_episode(env, task: str, seed: int, max_steps: int, style: str = TINY_PROMPT_STYLE,
                 quote_target: bool = False) -> tuple[list[dict], float, object]:
    """Solve one (task, seed) with the scripted solver. Returns (SFT rows, final reward, first observation)."""
    observation = env.reset(task, seed)
    first = observation
    turns: list = []
    history: list = []  # agent.rows.StepView of the steps so far
    rows: list[dict] = []
    reward = 0.0
    for index in range(max_steps):
        row, turn, view = demo_row(task, observation, history, turns,
                                   {"task": task, "seed": seed, "step": index, "source": "solver"}, style, quote_target)
        rows.append(row)
        result = env.step(turn.action)
        turns.append(turn)
        history.append(view)
        reward = float(result.reward)
        if result.done:
            break
        observation = result.observation
    return rows, reward, first


@functools.cache
def relabel_words() -> tuple[str, ...]:
    """The words a relabelled variant draws from: the tiny tokenizer's merged tokens made of letters only
    and ASCII (so each is one token, as a real short label is)."""
    words = {left + right for left, right in read_merges()}
    return tuple(sorted(word for word in words if len(word) >= 2 and word.isascii() and word.isalpha()))


_WORD = re.compile(r"[^\W\d_]+")


def relabel_observation(observation, rng: random.Random, words: tuple[str, ...]):
    """``observation`` with every word of its elements and of its instruction's quotes replaced by a random one
    of ``words``; the same word always by the same one, so the instruction still names the same element."""
    mapping: dict[str, str] = {}

    def swap(text: str) -> str:
        return _WORD.sub(lambda match: mapping.setdefault(match.group(0), rng.choice(words)), text)

    elements = [dataclasses.replace(element, text=swap(element.text)) for element in observation.elements]
    instruction = QUOTED_TEXT.sub(lambda match: f'"{swap(match.group(1))}"', observation.instruction)
    return dataclasses.replace(observation, instruction=instruction, elements=elements)


def augmented_rows(task: str, seed: int, observation, count: int, style: str = TINY_PROMPT_STYLE,
                   quote_target: bool = False, relabel: float = 0.0) -> list[dict]:
    """``count`` synthetic variants of a solved one-step episode (see the module docstring)."""
    rng = random.Random(f"{task}:{seed}")
    rows = []
    for index in range(count):
        variant = augment_observation(observation, rng)
        relabelled = relabel > 0 and rng.random() < relabel
        if relabelled:
            variant = relabel_observation(variant, rng, relabel_words())
        try:
            row, _, _ = demo_row(task, variant, [], [],
                                 {"task": task, "seed": seed, "step": 0, "source": "augment", "variant": index,
                                  "relabelled": relabelled}, style, quote_target)
        except SolverError:
            continue
        rows.append(row)
    return rows


def write_demos(config: DemosConfig) -> dict:
    """Run every (task, seed), write the rows of rewarded episodes to ``config.out``."""
    tasks, seeds = parse_tasks(config.tasks), parse_seeds(config.seeds)
    if not tasks or not seeds:
        raise TrainerError("demos needs --tasks and --seeds")
    if not config.out:
        raise TrainerError("--out is required: the JSONL file to write")
    if not 0 <= config.relabel <= 1:
        raise TrainerError(f"--relabel is a share between 0 and 1, not {config.relabel}")
    out = Path(config.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    timer = Timer()
    counts = {task: {"episodes": 0, "solved": 0, "rows": 0, "solver_errors": 0} for task in tasks}
    total, done = len(tasks) * len(seeds), 0
    # MiniWoB episodes restarted inside the loaded page: the same seeded episodes, far cheaper resets
    env = make_env(config.env, **({"fresh_context": False} if config.env == "miniwob" else {}))
    try:
        with open(out, "w", encoding="utf-8") as fh:
            for task in tasks:
                for seed in seeds:
                    done += 1
                    counts[task]["episodes"] += 1
                    try:
                        rows, reward, first = demo_episode(env, task, seed, config.max_episode_steps,
                                                           config.prompt_style, config.quote_target)
                    except SolverError as exc:
                        counts[task]["solver_errors"] += 1
                        log.warning("demos: %s seed %d: %s", task, seed, exc)
                        continue
                    if reward > 0:
                        counts[task]["solved"] += 1
                    elif not config.keep_failed:
                        continue
                    if reward > 0 and len(rows) == 1:
                        rows += augmented_rows(task, seed, first, config.augment, config.prompt_style,
                                               config.quote_target, config.relabel)
                    for row in rows:
                        fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    counts[task]["rows"] += len(rows)
                    if done % 10 == 0 or done == total:
                        emit({"step": done, "total": total, "task": task, "rows": sum(c["rows"] for c in counts.values())})
    finally:
        env.close()
    return {"per_task": counts, "rows": sum(c["rows"] for c in counts.values()), "seconds": timer.elapsed()}
