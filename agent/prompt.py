"""The one prompt renderer: rollouts, dataset export and training all call it.

The model is trained on exactly the text it is served, so every prompt comes from here. The text
is kept compact and regular on purpose: a tiny character-level model must learn from it.

Message layout (OpenAI / TRL chat format)::

    system     SYSTEM_PROMPT
    user       Instruction: ...  [Earlier actions: a; b]  observation text of step k
    assistant  Thought: ... / Action: ...            (for each of the last ``history_window`` steps)
    ...
    user       observation text of the current step   [+ Feedback: ...]   [+ screenshot]
"""

from __future__ import annotations

import base64
from urllib.parse import urlsplit

from agent.actions import parse_turn
from agent.envs.base import Observation

__all__ = ["SYSTEM_PROMPT", "render_messages", "render_observation"]

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


def render_observation(observation: Observation) -> str:
    """Instruction, URL and the elements (one a line): the text of one step's screen."""
    lines = [f"Instruction: {observation.instruction}"]
    url = _display_url(observation.url)
    if url:
        lines.append(f"URL: {url}")
    body = observation.elements_text()
    lines.append(body if body else "(no elements)")
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
) -> list[dict]:
    """Chat messages for the next turn.

    ``history`` holds ``(observation_text, assistant_turn_text)`` of earlier steps, oldest first.
    Only the last ``history_window`` of them appear in full; older ones are summarised as their
    action lines. The instruction is stated once, at the top of the first user message (an
    observation text's own leading ``Instruction:`` line is dropped). With ``image`` the last user content is a list of text and image parts;
    otherwise every content is a plain string.
    """
    if history_window < 0:
        raise ValueError("history_window must be >= 0")
    cut = max(len(history) - history_window, 0)
    older, recent = history[:cut], history[cut:]

    # The instruction is said once, at the top; later screens drop their own instruction line.
    instruction_line = f"Instruction: {instruction}"

    def screen(text: str) -> str:
        return text[len(instruction_line) + 1:] if text.startswith(instruction_line + "\n") else text

    header = [instruction_line]
    if older:
        header.append("Earlier actions: " + "; ".join(_action_line(text) for _, text in older))

    messages: list[dict] = [{"role": "system", "content": SYSTEM_PROMPT}]
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
