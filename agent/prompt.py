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

Message layout (OpenAI / TRL chat format)::

    system     the style's system prompt
    user       Instruction: ...  [Earlier actions: a; b]  observation text of step k
    assistant  Thought: ... / Action: ...            (for each of the last ``history_window`` steps)
    ...
    user       observation text of the current step   [+ Feedback: ...]   [+ screenshot]
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent.actions import parse_turn
from agent.envs.base import Element, Observation

__all__ = [
    "COMPACT_SYSTEM_PROMPT",
    "NAMED_SYSTEM_PROMPT",
    "DEFAULT_STYLE",
    "FORMAT_SYSTEM_PROMPTS",
    "PROMPT_STYLES",
    "QUOTED_TEXT",
    "SYSTEM_PROMPT",
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


def _action_line(turn_text: str) -> str:
    turn = parse_turn(turn_text)
    return turn.action.to_text() if turn.action is not None else "(void turn)"


def _image_part(image: bytes) -> dict:
    encoded = base64.b64encode(image).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{encoded}"}}


def render_messages(
    *,
    instruction: str,
    observation_text: str,
    history: list[tuple[str, str]],
    image: bytes | None = None,
    history_window: int = 4,
    feedback: str | None = None,
    style: str = DEFAULT_STYLE,
) -> list[dict]:
    """Chat messages for the next turn, in prompt ``style``.

    ``history`` holds ``(observation_text, assistant_turn_text)`` of earlier steps, oldest first;
    observation texts come from :func:`render_observation` with the same ``style``.
    Only the last ``history_window`` of them appear in full; older ones are summarised as their
    action lines. The instruction is stated once, at the top of the first user message (an
    observation text's own leading instruction line is dropped). With ``image`` the last user
    content is a list of text and image parts; otherwise every content is a plain string.
    """
    if history_window < 0:
        raise ValueError("history_window must be >= 0")
    spec = _style(style)
    cut = max(len(history) - history_window, 0)
    older, recent = history[:cut], history[cut:]

    # The instruction is said once, at the top; later screens drop their own instruction line.
    instruction_line = spec.instruction + instruction

    def screen(text: str) -> str:
        return text[len(instruction_line) + 1:] if text.startswith(instruction_line + "\n") else text

    header = [instruction_line]
    if older:
        header.append(spec.earlier + "; ".join(_action_line(text) for _, text in older))

    messages: list[dict] = [{"role": "system", "content": spec.system}]
    for index, (obs_text, turn_text) in enumerate(recent):
        content = "\n".join([*header, screen(obs_text)]) if index == 0 else screen(obs_text)
        messages.append({"role": "user", "content": content})
        messages.append({"role": "assistant", "content": turn_text})
    last = "\n".join([*header, screen(observation_text)]) if not recent else screen(observation_text)
    if feedback:
        last += "\nFeedback: " + " ".join(feedback.split())
    if image is not None:
        messages.append({"role": "user", "content": [{"type": "text", "text": last}, _image_part(image)]})
    else:
        messages.append({"role": "user", "content": last})
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
    "qwen-relative": (
        "You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        + json.dumps(_QWEN_TOOL) + "\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call>\nCall exactly one function per turn; write one short sentence of "
        "thought before it."
    ),
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
