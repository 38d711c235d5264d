"""The ``scripted`` backend: the task's scripted solver behind the Policy interface.

It reads the screen back from the prompt text (the instruction and element lines that
``agent.prompt`` rendered), so it sees exactly what a model sees. Useful to run the whole stack
(rollout worker, live session UI) without a checkpoint, and in tests of the rollout loop.
Element sizes are not in the prompt, so they come back as 0.
"""

from __future__ import annotations

import re
import time

from agent.actions import parse_turn
from agent.envs.base import Element, Observation
from agent.policies.base import Policy, PolicyOutput
from agent.policies.local import messages_as_text
from agent.solvers import solve_step

__all__ = ["ScriptedPolicy", "observation_from_prompt"]

_ELEMENT = re.compile(r'^\[(?P<role>[^\]]+)\] "(?P<text>.*)" at \((?P<x>-?\d+), (?P<y>-?\d+)\)'
                      r"(?P<checked> checked| unchecked)?(?P<focused> focused)?$")


def observation_from_prompt(messages: list[dict]) -> tuple[Observation, list]:
    """The Observation of the last user message, and the earlier assistant turns (parsed)."""
    flat = messages_as_text(messages)
    users = [m["content"] for m in flat if m["role"] == "user"]
    instruction = ""
    for content in users:  # the instruction is stated once, in the first user message (each style's prefix)
        match = re.search(r"^(?:Instruction|Task): (.*)$", content, re.MULTILINE)
        if match:
            instruction = match.group(1)
    elements, url, screen = [], "", None
    for line in users[-1].splitlines() if users else []:
        if screen is not None:  # a text screen (the terminal's) is the observation's last lines, from "Screen:" on
            screen.append(line)
            continue
        if line == "Screen:":
            screen = [line]
            continue
        if line.startswith("URL: "):
            url = line[len("URL: "):]
        match = _ELEMENT.match(line)
        if match:
            checked = match.group("checked")
            elements.append(Element(
                role=match.group("role"), text=match.group("text"), x=int(match.group("x")), y=int(match.group("y")),
                width=0, height=0, checked=None if checked is None else checked == " checked",
                focused=bool(match.group("focused")),
            ))
    history = [parse_turn(m["content"]) for m in flat if m["role"] == "assistant"]
    return Observation(instruction=instruction, url=url, screenshot=b"", width=0, height=0, elements=elements,
                       screen_text="\n".join(screen) if screen is not None else ""), history


class ScriptedPolicy(Policy):
    name = "scripted"

    def __init__(self, task: str) -> None:
        self.task = task

    def act(self, messages: list[dict], *, temperature: float | None = None) -> PolicyOutput:
        started = time.perf_counter()
        try:
            observation, history = observation_from_prompt(messages)
            text = solve_step(self.task, observation, history).to_text()
            error = None
        except Exception as exc:  # noqa: BLE001 - act() reports, it does not raise
            text, error = "", f"scripted solver failed: {exc}"
        return PolicyOutput(text=text, model=f"scripted:{self.task}",
                            latency_ms=(time.perf_counter() - started) * 1000, error=error)
