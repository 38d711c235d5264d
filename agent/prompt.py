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
a plain string. :func:`map_image_urls` rewrites the image URLs (the flywheel stores references to its
screenshot files instead of the base64, and turns them back), :func:`image_bytes` reads a data URL.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlsplit

from agent import formats
from agent.actions import Action, Turn, parse_turn
from agent.envs.base import Element, Observation

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
    "image_bytes",
    "image_url",
    "map_image_urls",
    "prompt_style_of",
    "quoted_names",
    "render_element",
    "render_messages",
    "render_observation",
    "restyle_messages",
    "system_prompt",
]

SYSTEM_PROMPT = (
    "You operate a screen to complete the instruction. Each turn you see the screen's elements as "
    '[role] "text" at (x, y), x and y being screenshot pixels of the element\'s centre. '
    "Reply with exactly two parts:\n"
    "Thought: <one short sentence>\n"
    "Action: <one action>\n"
    "Actions: click(x=, y=), double_click(x=, y=), right_click(x=, y=), drag(x1=, y1=, x2=, y2=), "
    'type(text="..."), hotkey(keys="ctrl+a"), scroll(x=, y=, direction="down"), wait(), '
    'finished(answer="..."), call_user(question="...").\n'
    'Coordinates are whole pixels; strings are double-quoted, with \\" \\\\ and \\n escapes.'
)
COMPACT_SYSTEM_PROMPT = "Act on the screen. Reply Thought: then Action:."
NAMED_SYSTEM_PROMPT = "Act on the screen; Named: is what the task quotes. Reply Thought: then Action:."


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


def _mime(image: bytes) -> str:
    if image.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if image[:4] == b"RIFF" and image[8:12] == b"WEBP":
        return "image/webp"
    return "image/jpeg"  # what every env writes (agent/envs/base.py)


def image_url(image: bytes) -> str:
    """A screenshot as the ``data:`` URL of an image part."""
    return f"data:{_mime(image)};base64,{base64.b64encode(image).decode('ascii')}"


def image_bytes(url: str) -> bytes:
    """The image a ``data:image/...;base64,`` URL holds; ValueError for anything else."""
    header, comma, payload = url.partition(",") if isinstance(url, str) else ("", "", "")
    if not (header.startswith("data:image/") and header.endswith(";base64") and comma):
        raise ValueError(f"not a base64 data:image URL: {str(url)[:40]!r}")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the data:image URL is not valid base64") from None


def _image_part(image: bytes) -> dict:
    return {"type": "image_url", "image_url": {"url": image_url(image)}}


def map_image_urls(messages: list[dict], change: Callable[[str], str]) -> list[dict]:
    """``messages`` with the URL of every image part replaced by ``change(url)``; the rest as it was.

    The flywheel stores a prompt with each screenshot's base64 replaced by a reference to its stored file,
    and puts the base64 back when it needs the prompt as it was sent (see rollouts/episodes.py)."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [{**part, "image_url": {**part["image_url"], "url": change(part["image_url"]["url"])}}
                       if part.get("type") == "image_url" and isinstance(part.get("image_url"), dict) else part
                       for part in content]
            message = {**message, "content": content}
        out.append(message)
    return out


def _user(text: str, image: bytes | None) -> dict:
    if image is None:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "text", "text": text}, _image_part(image)]}


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


# How a model of each answer format (agent/formats) is told to answer. The instruction and the screen
# come in the user messages as for Loupe's own prompt; ``loupe`` is the ``full`` style's SYSTEM_PROMPT.
_UITARS_BOX = "start_box='<|box_start|>(x1,y1)<|box_end|>'"
_QWEN_TOOL = {
    "type": "function",
    "function": {
        "name": "computer_use",
        "description": "Use a mouse and keyboard to interact with a computer, and take screenshots.\n"
                       "* The screen's resolution is 1000x1000: coordinates are on a 0-1000 grid over the screenshot.\n"
                       "* Click buttons, links and icons with the cursor tip in the centre of the element.",
        "parameters": {
            "type": "object",
            "required": ["action"],
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["left_click", "double_click", "right_click", "left_click_drag", "type", "key",
                             "scroll", "hscroll", "wait", "terminate", "answer", "call_user"],
                    "description": "left_click, double_click, right_click: click at coordinate. left_click_drag: "
                                   "drag from start_coordinate to coordinate. type: type text (end it with \\n to "
                                   "submit). key: press keys together. scroll/hscroll: scroll by pixels at "
                                   "coordinate (positive up/right). wait: wait. terminate: end the task with status. "
                                   "answer: end the task answering text. call_user: ask the user text.",
                },
                "coordinate": {"type": "array", "description": "(x, y) on the 0-1000 grid."},
                "start_coordinate": {"type": "array", "description": "(x, y) where left_click_drag starts."},
                "text": {"type": "string", "description": "For type, answer and call_user."},
                "keys": {"type": "array", "description": "For key, e.g. [\"ctrl\", \"c\"]."},
                "pixels": {"type": "number", "description": "For scroll and hscroll."},
                "time": {"type": "number", "description": "For wait, in seconds."},
                "status": {"type": "string", "enum": ["success", "failure"], "description": "For terminate."},
            },
        },
    },
}
# Qwen2.5-VL's tool points in pixels of the screenshot as the model sees it (resized), not on the 0-1000 grid
_QWEN25_TOOL = json.loads(json.dumps(_QWEN_TOOL))
_QWEN25_TOOL["function"]["description"] = (
    "Use a mouse and keyboard to interact with a computer, and take screenshots.\n"
    "* Coordinates are pixels of the screenshot as you see it, from its top left corner.\n"
    "* Click buttons, links and icons with the cursor tip in the centre of the element.")
_QWEN25_TOOL["function"]["parameters"]["properties"]["coordinate"]["description"] = "(x, y) in pixels."


def _qwen_prompt(tool: dict) -> str:
    return (
        "You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + json.dumps(tool) + "\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call>\nCall exactly one function per turn; write one short sentence of "
        "thought before it."
    )


FORMAT_SYSTEM_PROMPTS: dict[str, str] = {
    "loupe": SYSTEM_PROMPT,
    "uitars": (
        "You are a GUI agent. You are given a task and your action history, with screenshots. "
        "You need to perform the next action to complete the task.\n\n"
        "## Output Format\n```\nThought: ...\nAction: ...\n```\n\n"
        "## Action Space\n"
        f"click({_UITARS_BOX})\n"
        f"left_double({_UITARS_BOX})\n"
        f"right_single({_UITARS_BOX})\n"
        f"drag({_UITARS_BOX}, end_box='<|box_start|>(x3,y3)<|box_end|>')\n"
        "hotkey(key='ctrl c') # Split keys with a space and use lowercase; at most 3 keys.\n"
        "type(content='xxx') # Escape \\', \\\" and \\n in content. To submit your input, end content with \\n.\n"
        f"scroll({_UITARS_BOX}, direction='down or up or right or left')\n"
        "wait() # Sleep for 5s and take a screenshot to check for any changes.\n"
        "finished(content='xxx') # The task is done; content answers it if it asks a question.\n"
        "call_user() # Ask the user for help when the task is unsolvable or needs them.\n\n"
        "## Note\n"
        "- Write a small plan and finally summarize your next action (with its target element) in one "
        "sentence in `Thought` part."
    ),
    "qwen3-relative": _qwen_prompt(_QWEN_TOOL),
    "qwen25-absolute": _qwen_prompt(_QWEN25_TOOL),
    "pyautogui": (
        "You are a GUI agent. You are given a task and a screenshot of the screen. You need to perform a "
        "series of pyautogui actions to complete the task.\n\n"
        "For each step, answer in this format:\n"
        "## Thought\n<assess the progress and choose the next action>\n"
        "## Action\n<the target and the interaction, in one sentence>\n"
        "## Code\n```python\n<exactly one action>\n```\n\n"
        "Coordinates are screenshot pixels. Actions: pyautogui.click(x=, y=), pyautogui.doubleClick(x=, y=), "
        "pyautogui.rightClick(x=, y=), pyautogui.moveTo(x=, y=) then pyautogui.dragTo(x=, y=), "
        "pyautogui.write(message='...'), pyautogui.press('enter'), pyautogui.hotkey('ctrl', 'c'), "
        "pyautogui.scroll(-5, x=, y=) (negative scrolls down), computer.wait(seconds=2), "
        "computer.terminate(status='success', answer='...') or computer.terminate(status='failure'), "
        "computer.call_user(question='...')."
    ),
}
FORMAT_SYSTEM_PROMPTS.update({old: FORMAT_SYSTEM_PROMPTS[new] for old, new in formats.ALIASES.items()})
