"""The one prompt renderer: rollouts, dataset export and training all call it.

The model is trained on exactly the text it is served, so every prompt comes from here, in the
*prompt style* of the checkpoint that reads it. Three styles:

- ``full`` (the default, for real models): a system prompt that documents the whole action
  grammar, and element lines such as ``[button] "ok" at (30, 100)``.
- ``compact`` (the tiny model's checkpoints before 2026-12-03): a one-line system prompt and terse
  element lines such as ``[button] "ok" x=30, y=100``. The full system prompt alone is ~600 byte
  tokens, more than the whole compact prompt of a MiniWoB screen; a tiny model learns nothing from it.
- ``named`` (the tiny model): ``compact``, and each screen opens with a ``Named:`` line for every
  element whose whole text the instruction quotes (``Named: [button] "ok" x=30, y=100``), before
  the elements in their order. It is a candidate list by string match, the first stage of a
  two-stage agent such as MindAct: which element to act on stays the model's to say (two elements
  may carry the name, most instructions quote nothing), but the centre of the one a task names
  stands at about the same place in every prompt. A three-layer model learns that copy; finding
  the line among the screen's by its name, in ten minutes of CPU, it did not (trainer/README.md).

A checkpoint records its style in ``loupe.json`` (``"prompt_style"``); the local policy reads it
and the rollout loop renders with it. :func:`restyle_messages` turns messages rendered in one
style into the other, line by line, so rows rendered for one model can train another.

A checkpoint also speaks an *action format* (agent/formats: ``loupe``, ``uitars``, ``qwen3-relative``,
``qwen25-absolute``, ``pyautogui``; ``qwen-relative`` is qwen3-relative's old name) and may read
screenshots. In a format other than ``loupe`` the system prompt is the format's
(:data:`FORMAT_SYSTEM_PROMPTS`) and every earlier assistant turn is written in the format from the step's
canonical action (what ran, a person's correction included), so the model reads its history
as it would have written it; the screen text stays in the user turns. A reading policy gets the current
screenshot and up to N earlier ones, each in the user turn of the step it shows.

Message layout (OpenAI / TRL chat format)::

    system     the style's (format's) system prompt
    user       Instruction: ...  [Earlier actions: a; b]  observation text of step k   [+ its screenshot]
    assistant  Thought: ... / Action: ...            (for each of the last ``history_window`` steps)
    ...
    user       observation text of the current step   [+ Feedback: ...]   [+ screenshot]

A user turn with a screenshot is a list of parts, text first: ``[{"type": "text", "text": ...},
{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,..."}}]``; every other content is
a plain string. agent/images.py makes and reads those parts; every system prompt, the styles' and the formats',
is in agent/system_prompts.py.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

from agent import formats
from agent.actions import Action, Turn, parse_turn
from agent.envs.base import Element, Observation
from agent.images import image_part
from agent.system_prompts import COMPACT_SYSTEM_PROMPT, FORMAT_SYSTEM_PROMPTS, NAMED_SYSTEM_PROMPT, SYSTEM_PROMPT

__all__ = [
    "COMPACT_SYSTEM_PROMPT",
    "NAMED_SYSTEM_PROMPT",
    "DEFAULT_STYLE",
    "FORMAT_SYSTEM_PROMPTS",
    "HistoryStep",
    "PROMPT_STYLES",
    "QUOTED_TEXT",
    "SYSTEM_PROMPT",
    "action_in_format",
    "prompt_style_of",
    "quoted_names",
    "render_element",
    "render_messages",
    "render_observation",
    "restyle_messages",
    "system_prompt",
]


@dataclass(frozen=True)
class _Style:
    system: str
    instruction: str  # prefix of the instruction line
    earlier: str  # prefix of the summary of older actions
    element: re.Pattern  # one element line; groups: role, text, x, y, flags
    element_format: str  # str.format with role, text, x, y
    max_text: int  # longer element texts are cut to this many characters, "..." included
    named: str = ""  # prefix of the lines that repeat the elements the instruction quotes; empty: none


_FLAGS = r"((?: checked| unchecked)?(?: focused)?)"
_STYLES = {
    "full": _Style(SYSTEM_PROMPT, "Instruction: ", "Earlier actions: ",
                   re.compile(r'\[([\w-]+)\] "(.*)" at \((-?\d+), (-?\d+)\)' + _FLAGS), '[{role}] "{text}" at ({x}, {y})', 60),
    "compact": _Style(COMPACT_SYSTEM_PROMPT, "Task: ", "Before: ",
                      re.compile(r'\[([\w-]+)\] "(.*)" x=(-?\d+), y=(-?\d+)' + _FLAGS), '[{role}] "{text}" x={x}, y={y}', 24),
    "named": _Style(NAMED_SYSTEM_PROMPT, "Task: ", "Before: ",
                    re.compile(r'\[([\w-]+)\] "(.*)" x=(-?\d+), y=(-?\d+)' + _FLAGS), '[{role}] "{text}" x={x}, y={y}', 24,
                    named="Named: "),
}
PROMPT_STYLES: tuple[str, ...] = tuple(_STYLES)
DEFAULT_STYLE = "full"


def _style(style: str) -> _Style:
    try:
        return _STYLES[style]
    except KeyError:
        raise ValueError(f"unknown prompt style {style!r}; expected one of: {', '.join(PROMPT_STYLES)}") from None


def system_prompt(style: str = DEFAULT_STYLE) -> str:
    """The system message of ``style``."""
    return _style(style).system


_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _display_url(url: str) -> str:
    """A URL as shown to the model. Loopback hosts drop their host and port, which change
    from process to process, so the same page always renders to the same text."""
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.hostname in _LOOPBACK:
        return parts.path + (f"?{parts.query}" if parts.query else "")
    return url


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


QUOTED_TEXT = re.compile(r'"([^"]*)"')  # a text the instruction quotes: what it names


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@functools.lru_cache(maxsize=4096)  # every step of an episode, and every row made from it, asks again
def quoted_names(instruction: str) -> frozenset[str]:
    """The texts ``instruction`` quotes, whitespace collapsed: what a ``Named:`` line answers to."""
    return frozenset(name for name in map(_squash, QUOTED_TEXT.findall(instruction)) if name)


def render_element(element: Element, style: str = DEFAULT_STYLE) -> str:
    """One element's line: role, text (whitespace collapsed, cut to the style's length), centre, state."""
    spec = _style(style)
    text = _cut(_squash(element.text), spec.max_text)
    line = spec.element_format.format(role=element.role, text=text, x=element.x, y=element.y)
    if element.checked is not None:
        line += " checked" if element.checked else " unchecked"
    if element.focused:
        line += " focused"
    return line


def render_observation(observation: Observation, style: str = DEFAULT_STYLE) -> str:
    """Instruction, the style's ``Named:`` lines, URL and the elements (one a line): one step's screen."""
    spec = _style(style)
    lines = [spec.instruction + observation.instruction]
    if spec.named:
        names = quoted_names(observation.instruction)
        lines.extend(spec.named + render_element(element, style)
                     for element in observation.elements if _squash(element.text) in names)
    head = len(lines)
    url = _display_url(observation.url)
    if url:
        lines.append(f"URL: {url}")
    lines.extend(render_element(element, style) for element in observation.elements)
    if observation.screen_text:
        lines.append(observation.screen_text)
    if len(lines) == head + (1 if url else 0):
        lines.append("(no elements)")
    return "\n".join(lines)


class HistoryStep(NamedTuple):
    """One earlier step as :func:`render_messages` shows it.

    ``turn`` is what ran: a :class:`~agent.actions.Turn`, or its canonical text (Loupe's grammar; a void
    turn: the text the model wrote). ``width`` x ``height`` is the step's screenshot, where a format other
    than ``loupe`` writes the action's coordinates. A plain ``(observation_text, turn_text)`` pair is
    read as a HistoryStep without a size (enough for format ``loupe``).
    """

    observation_text: str
    turn: Turn | str
    width: int = 0
    height: int = 0


def _as_turn(turn: Turn | str) -> Turn:
    return turn if isinstance(turn, Turn) else parse_turn(turn)


def action_in_format(action: Action, action_format: str, width: int, height: int, pixels: dict | None = None) -> str:
    """``action`` on one line, as a model of ``action_format`` writes it (coordinates on its grid over a
    ``width`` x ``height`` screenshot; ``pixels``: the served processor's min_pixels / max_pixels, which set a
    resized-image grid): how summaries and rejection feedback name an action to that model."""
    if action_format == "loupe":
        return action.to_text()
    text = formats.render("", action, format=action_format, width=width, height=height, **(pixels or {}))
    lines = [line.strip() for line in text.split("\n")[1:] if line.strip()]  # line 1 is the (empty) thought header
    line = " ".join(lines)
    return line[len("Action: "):] if line.startswith("Action: ") else line


def _assistant_text(step: HistoryStep, action_format: str, pixels: dict | None = None) -> str:
    if action_format == "loupe":
        return step.turn if isinstance(step.turn, str) else step.turn.to_text()
    turn = _as_turn(step.turn)
    if turn.action is None:
        return turn.raw  # a void turn, as the model wrote it
    return formats.render(turn.thought, turn.action, format=action_format, width=step.width, height=step.height,
                          **(pixels or {}))


def _summary(step: HistoryStep, action_format: str, pixels: dict | None = None) -> str:
    turn = _as_turn(step.turn)
    if turn.action is None:
        return "(void turn)"
    return action_in_format(turn.action, action_format, step.width, step.height, pixels)


def _user(text: str, image: bytes | None) -> dict:
    if image is None:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "text", "text": text}, image_part(image)]}


def render_messages(
    *,
    instruction: str,
    observation_text: str,
    history: Sequence[HistoryStep | tuple],
    image: bytes | None = None,
    history_window: int = 4,
    feedback: str | None = None,
    style: str = DEFAULT_STYLE,
    action_format: str = "loupe",
    images: Sequence[bytes | None] | None = None,
    texts: dict | None = None,
    pixels: dict | None = None,
) -> list[dict]:
    """Chat messages for the next turn, in prompt ``style`` and ``action_format``.

    ``history`` holds the earlier steps (:class:`HistoryStep`, or ``(observation_text, turn_text)``
    pairs), oldest first; observation texts come from :func:`render_observation` with the same
    ``style``. Only the last ``history_window`` of them appear in full; older ones are summarised as
    their actions (in the format). The instruction is stated once, at the top of the first user
    message (an observation text's own leading instruction line is dropped).

    ``images``: screenshots, oldest first, the last one the current screen's; ``images[-1 - k]`` goes
    with the user turn of the step ``k`` steps back (None: that turn has none). When they reach further
    back than ``history_window``, the window widens to hold them. ``image`` is ``images=[image]``.
    ``texts``: a dict kept across the prompts of one episode where each history step's summary and assistant text
    are kept once made, keyed by the step's identity (the caller passes the same HistoryStep objects each time and
    keeps them alive as long as the dict).
    ``pixels``: the served checkpoint's image processor limits (``min_pixels`` / ``max_pixels``,
    agent.formats.pixel_limits) for a format that points on the resized image (``uitars``), as the answers are read.
    A user content with an image is a list of a text and an image part; every other is a plain string.
    With format ``loupe`` and no images the messages are those Loupe's text models were trained on.
    """
    if history_window < 0:
        raise ValueError("history_window must be >= 0")
    formats.check_format(action_format)
    if image is not None and images is not None:
        raise ValueError("give image (the current screen) or images (with earlier ones), not both")
    shots = list(images) if images is not None else ([image] if image is not None else [])
    if len(shots) > len(history) + 1:
        raise ValueError(f"{len(shots)} images for {len(history) + 1} user turns; one image per step at most")
    if texts is not None and not all(isinstance(item, HistoryStep) for item in history):
        texts = None  # pairs become new objects on each call: their identity says nothing the next time
    steps = [item if isinstance(item, HistoryStep) else HistoryStep(*item) for item in history]
    if action_format != "loupe":
        for number, step in enumerate(steps):
            if step.width <= 0 or step.height <= 0:
                raise ValueError(f"history step {number} has no screenshot size; format {action_format} writes "
                                 "coordinates on it")
    spec = _style(style)
    window = max(history_window, len(shots) - 1)
    cut = max(len(steps) - window, 0)
    older, recent = steps[:cut], steps[cut:]
    # shots[-1] is the current screen's; the one before it belongs to recent[-1], and so on
    recent_shots: list[bytes | None] = [None] * len(recent)
    for back, shot in enumerate(reversed(shots[:-1]), start=1):
        recent_shots[-back] = shot
    current_shot = shots[-1] if shots else None

    # The instruction is said once, at the top; later screens drop their own instruction line.
    instruction_line = spec.instruction + instruction

    def screen(text: str) -> str:
        return text[len(instruction_line) + 1:] if text.startswith(instruction_line + "\n") else text

    def text(step: HistoryStep, kind: str) -> str:
        make = _summary if kind == "summary" else _assistant_text
        if texts is None:
            return make(step, action_format, pixels)
        key = (id(step), action_format, kind)
        if key not in texts:
            texts[key] = make(step, action_format, pixels)
        return texts[key]

    header = [instruction_line]
    if older:
        header.append(spec.earlier + "; ".join(text(step, "summary") for step in older))

    system = spec.system if action_format == "loupe" else FORMAT_SYSTEM_PROMPTS[action_format]
    messages: list[dict] = [{"role": "system", "content": system}]
    for index, step in enumerate(recent):
        content = "\n".join([*header, screen(step.observation_text)]) if index == 0 else screen(step.observation_text)
        messages.append(_user(content, recent_shots[index]))
        messages.append({"role": "assistant", "content": text(step, "assistant")})
    last = "\n".join([*header, screen(observation_text)]) if not recent else screen(observation_text)
    if feedback:
        last += "\nFeedback: " + " ".join(feedback.split())
    messages.append(_user(last, current_shot))
    return messages


def prompt_style_of(messages: list[dict]) -> str | None:
    """The style whose system prompt opens ``messages``; None when there is no known one."""
    if not messages or messages[0].get("role") != "system":
        return None
    return next((name for name, spec in _STYLES.items() if messages[0].get("content") == spec.system), None)


def _restyle_line(line: str, source: _Style, target: _Style) -> str:
    for prefix, new in ((source.instruction, target.instruction), (source.earlier, target.earlier)):
        if line.startswith(prefix):
            return new + line[len(prefix):]
    match = source.element.fullmatch(line)
    if match:
        role, text, x, y, flags = match.groups()
        return target.element_format.format(role=role, text=_cut(text, target.max_text), x=x, y=y) + flags
    return line


def _restyle_text(text: str, source: _Style, target: _Style, names: frozenset[str]) -> str:
    """One user content in ``target``: its lines converted; the source's ``Named:`` lines dropped and the
    target's made afresh from the screen's element lines, after the header (instruction, summary)."""
    lines = [line for line in text.split("\n") if not (source.named and line.startswith(source.named))]
    head = 0
    while head < len(lines) and lines[head].startswith((source.instruction, source.earlier)):
        head += 1
    named = []
    if target.named:
        for line in lines[head:]:
            match = source.element.fullmatch(line)
            if match and match.group(2) in names:
                named.append(target.named + _restyle_line(line, source, target))
    converted = [_restyle_line(line, source, target) for line in lines]
    return "\n".join(converted[:head] + named + converted[head:])


def _instruction_of(messages: list[dict], spec: _Style) -> str:
    """The instruction stated at the top of the first user message (render_messages puts it there)."""
    for message in messages:
        if message.get("role") == "user":
            content = message["content"]
            text = content if isinstance(content, str) else next(
                (part.get("text", "") for part in content if part.get("type") == "text"), "")
            first = text.split("\n", 1)[0]
            return first[len(spec.instruction):] if first.startswith(spec.instruction) else ""
    return ""


def restyle_messages(messages: list[dict], style: str) -> list[dict]:
    """``messages`` rendered by :func:`render_messages` in another style, re-rendered in ``style``.

    The source style is told by the system prompt; messages in no known style, or already in
    ``style``, come back unchanged. User contents are converted line by line (instruction and
    summary prefixes, element lines); assistant turns are the model's own text and stay as written.
    """
    target = _style(style)
    source_name = prompt_style_of(messages)
    if source_name is None or source_name == style:
        return messages
    source = _STYLES[source_name]
    names = quoted_names(_instruction_of(messages, source))
    out = [{**messages[0], "content": target.system}]
    for message in messages[1:]:
        content = message["content"]
        if message["role"] == "user":
            if isinstance(content, str):
                content = _restyle_text(content, source, target, names)
            else:
                content = [{**part, "text": _restyle_text(part["text"], source, target, names)}
                           if part.get("type") == "text" else part for part in content]
        out.append({**message, "content": content})
    return out
