"""The one row schema of training data, and rows rendered from structured steps for the model they train.

A row is rendered *for* a model: its prompt style (agent.prompt), the action format it answers in
(agent.formats), whether it reads screenshots and how many earlier ones it gets. :class:`RenderedFor`
records that, and every row the flywheel writes carries it, so the trainer uses the row as it is or refuses
it, and never re-writes its text. Rows are rendered from the steps' structure (:class:`StepView`: the screen's
elements, the canonical action), never parsed back out of a stored prompt, so the same episode trains a
text model in Loupe's grammar and a UI-TARS model in its own, with its screenshots.

Row kinds (JSONL, one row a line; the keys are those of the rows before this schema)::

    SFT / CT  {"messages": [...], "images": [path, ...], "meta": {...}, "rendered_for": {...}}
    DPO       {"prompt": [...], "chosen": [assistant], "rejected": [assistant], "images": [...], "meta": {...},
               "rendered_for": {...}}
    RL        {"messages": [..., user], "images": [...], "format", "width", "height", "reward": {"kind": ...},
               "meta", "rendered_for"}
    PRM       {"prompt": str, "completions": [str], "labels": [bool], "prompt_messages": [...], "images": [...],
               "meta", "rendered_for"}

PRM rows are TRL's stepwise-supervision format (what its PRMTrainer reads: a ``prompt`` string, ``completions`` and
one bool ``label`` per completion), one row a labelled step: the prompt the model was sent at that step (its screen
and history) as text (:func:`prompt_text`), the step's turn in the target's format as the completion, and whether
it was good. ``prompt_messages`` are the same prompt as chat messages, for a trainer that applies a chat template.

RL rows are :class:`GRPORow`, one a step, for every model: GRPO through TRL (trainer/grpo.py) samples fresh answers
to the step and scores each. The prompt ends with the user turn the answer replies to (with its screenshots for a
model that reads them; a text model's has none), and a ``reward`` spec says how an answer is scored (``env``: the
real environment replayed to the step by the canonical ``prefix`` of actions before it; ``action``: compared with a
known action).

Message contents are plain strings. ``images`` are the screenshots of the user turns that carry one, in order:
always the last ``len(images)`` user turns (the current screen's last), as trainer/vlm.py attaches them. A text
model's rows have none. ``rendered_for`` is absent from rows written before it (legacy rows, see trainer/data.py).
``from_dict(d, where)`` validates a row and raises one ValueError that starts with ``where`` (file and line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent import formats
from agent.actions import Action, Turn
from agent.envs.base import Element, Observation
from agent.prompt import DEFAULT_STYLE, PROMPT_STYLES, HistoryStep, render_messages, render_observation

__all__ = ["DPORow", "GRPORow", "HISTORY_WINDOW", "PRMRow", "RenderedFor", "SFTRow", "StepView", "render_prompt",
           "prompt_text", "render_turn", "row_from_dict"]

ROLES = ("system", "user", "assistant")
HISTORY_WINDOW = 4  # earlier steps shown in full, as agent.rollout.run_episode prompts by default


@dataclass(frozen=True)
class RenderedFor:
    """What a row was rendered for: the reading model's prompt style and action format, whether it reads
    screenshots, and how many earlier screenshots it gets (0 for a text model); for a format that points on the
    resized image (uitars, qwen25-absolute), its processor's pixel limits (None: the format's defaults), which set
    that grid as they do when the rollout reads its answers."""

    style: str = DEFAULT_STYLE
    action_format: str = "loupe"
    reads_images: bool = False
    history_images: int = 0
    min_pixels: int | None = None
    max_pixels: int | None = None

    def __post_init__(self) -> None:
        if self.style not in PROMPT_STYLES:
            raise ValueError(f"unknown prompt style {self.style!r}; expected one of: {', '.join(PROMPT_STYLES)}")
        formats.check_format(self.action_format)
        if not isinstance(self.reads_images, bool):
            raise ValueError(f"reads_images must be true or false, got {self.reads_images!r}")
        if isinstance(self.history_images, bool) or not isinstance(self.history_images, int) or self.history_images < 0:
            raise ValueError(f"history_images must be a whole number >= 0, got {self.history_images!r}")
        formats.check_pixels(self.min_pixels, self.max_pixels)

    @property
    def pixels(self) -> dict:
        """formats.parse / render's ``min_pixels`` / ``max_pixels``."""
        return {"min_pixels": self.min_pixels, "max_pixels": self.max_pixels}

    def to_dict(self) -> dict:
        limits = {key: value for key, value in self.pixels.items() if value is not None}  # rows before: none
        return {"style": self.style, "action_format": self.action_format, "reads_images": self.reads_images,
                "history_images": self.history_images, **limits}

    @classmethod
    def from_dict(cls, d: object, where: str) -> RenderedFor:
        if not isinstance(d, dict):
            raise ValueError(f"{where}: rendered_for must be an object, got {type(d).__name__}")
        unknown = sorted(set(d) - {"style", "action_format", "reads_images", "history_images", "min_pixels",
                                   "max_pixels"})
        if unknown:
            raise ValueError(f"{where}: rendered_for: unknown keys {unknown}")
        try:
            return cls(style=d.get("style", DEFAULT_STYLE), action_format=d.get("action_format", "loupe"),
                       reads_images=d.get("reads_images", False), history_images=d.get("history_images", 0),
                       min_pixels=d.get("min_pixels"), max_pixels=d.get("max_pixels"))
        except ValueError as exc:
            raise ValueError(f"{where}: rendered_for: {exc}") from None

    def describe(self) -> str:
        """For messages: ``uitars answers, full prompt, with screenshots``."""
        reads = f"with screenshots (+{self.history_images} earlier)" if self.reads_images else "text only"
        return f"{self.action_format} answers, {self.style} prompt, {reads}"


# --- rendering ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepView:
    """One step as its rows are rendered from it: the screen (instruction, url, elements, size, the path of its
    screenshot in the row's images, "" when none) and what ran (the thought and canonical action in screenshot
    pixels; None for a void turn, then ``raw`` is the text the model wrote)."""

    instruction: str
    url: str
    elements: Sequence[Element]
    width: int
    height: int
    screenshot: str = ""
    thought: str = ""
    action: Action | None = None
    raw: str = ""
    screen_text: str = ""

    def observation(self) -> Observation:
        return Observation(instruction=self.instruction, url=self.url, screenshot=b"", width=self.width,
                           height=self.height, elements=list(self.elements), screen_text=self.screen_text)

    def turn(self) -> Turn:
        if self.action is None:
            return Turn(thought=self.thought, action=None, void_reason="void turn", raw=self.raw)
        return Turn(thought=self.thought, action=self.action, void_reason=None, raw=self.raw)


def render_turn(thought: str, action: Action | None, target: RenderedFor, width: int, height: int,
                raw: str = "") -> str:
    """An assistant turn in the target's format, from the canonical action (Loupe's grammar: ``Thought: ... /
    Action: ...``, as rows always were). A void turn (no action) is ``raw``, the text as it was written."""
    if action is None:
        return raw
    return formats.render(thought, action, format=target.action_format, width=width, height=height, **target.pixels)


def _images(step: StepView, history: Sequence[StepView], target: RenderedFor) -> list[str]:
    """The current screenshot and up to ``history_images`` earlier ones (the latest that have one, in a row, so
    they go with the last user turns), when the target reads screenshots; none otherwise."""
    if not target.reads_images or not step.screenshot:
        return []
    earlier: list[str] = []
    for view in reversed(history[len(history) - target.history_images:] if target.history_images else []):
        if not view.screenshot:
            break
        earlier.insert(0, view.screenshot)
    return [*earlier, step.screenshot]


def render_prompt(step: StepView, history: Sequence[StepView], target: RenderedFor, *, feedback: str | None = None,
                  history_window: int = HISTORY_WINDOW, screens: dict | None = None) -> tuple[list[dict], list[str]]:
    """(messages, images) of the prompt at ``step`` for ``target``, by agent.prompt.render_messages: the messages
    a policy of that style and format is sent after ``history`` (the episode's earlier steps, oldest first), text
    contents only, and the paths of the screenshots its user turns carry (see the module docstring). For format
    ``loupe`` with no images these are exactly the messages a rollout sent the model.

    ``screens``: a dict the caller keeps while it renders one episode's rows, where each step's screen text is kept
    once rendered (a step's screen shows again in the history of the next steps' prompts). It is keyed by the
    views' identity, so the caller keeps the views alive as long as the dict (episode_rows' history does). The
    history entries made from the views, and their texts in the prompt, are kept there too: without them a step's
    row rebuilt every earlier step's turn and summary, a cost that grew with the square of the episode's length."""
    style = target.style

    def screen(view: StepView) -> str:
        if screens is None:
            return render_observation(view.observation(), style)
        key = (id(view), style)
        if key not in screens:
            screens[key] = render_observation(view.observation(), style)
        return screens[key]

    images = _images(step, history, target)
    window = max(history_window, len(images) - 1)
    cut = max(len(history) - window, 0)  # steps before it are summarised by their actions: their screens go unread

    def earlier(view: StepView, shown: bool) -> HistoryStep:
        def make() -> HistoryStep:
            return HistoryStep(screen(view) if shown else "", view.turn(), view.width, view.height)

        if screens is None:
            return make()
        key = (id(view), style, shown)
        if key not in screens:  # the same object each time, so that render_messages' texts memo finds it
            screens[key] = make()
        return screens[key]

    past = [earlier(view, i >= cut) for i, view in enumerate(history)]
    messages = render_messages(instruction=step.instruction, observation_text=screen(step),
                               history=past, history_window=window, feedback=feedback,
                               style=style, action_format=target.action_format, texts=screens, pixels=target.pixels)
    return messages, images


# --- rows ---------------------------------------------------------------------------------------------
def _messages(value: object, where: str, *, assistant_only: bool = False) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: expected a non-empty list of messages")
    out = []
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            raise ValueError(f"{where}[{index}]: a message must be an object with role and content")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ValueError(f"{where}[{index}]: role must be one of {', '.join(ROLES)}, got {role!r}")
        if assistant_only and role != "assistant":
            raise ValueError(f"{where}[{index}]: only assistant messages belong here, got {role!r}")
        if not isinstance(content, str):
            raise ValueError(f"{where}[{index}]: content must be a string, got {type(content).__name__}")
        out.append({"role": role, "content": content})
    return out


def _image_list(value: object, where: str, user_turns: int) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValueError(f"{where}: images must be a list of paths (or data:image URIs)")
    if len(value) > user_turns:
        raise ValueError(f"{where}: {len(value)} images but {user_turns} user turns; each image goes with a user turn")
    return list(value)


def _meta(value: object, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{where}: meta must be an object, got {type(value).__name__}")
    return value


def _rendered_for(d: dict, where: str) -> RenderedFor | None:
    return RenderedFor.from_dict(d["rendered_for"], where) if d.get("rendered_for") is not None else None


def _with_rendered_for(out: dict, rendered_for: RenderedFor | None) -> dict:
    if rendered_for is not None:
        out["rendered_for"] = rendered_for.to_dict()
    return out


def _users(messages: list[dict]) -> int:
    return sum(1 for message in messages if message["role"] == "user")


@dataclass
class SFTRow:
    """An SFT (or CT) row: a conversation whose assistant turns are learnt."""

    messages: list[dict]
    images: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    rendered_for: RenderedFor | None = None

    def to_dict(self) -> dict:
        return _with_rendered_for({"messages": self.messages, "images": self.images, "meta": self.meta},
                                  self.rendered_for)

    @classmethod
    def from_dict(cls, d: object, where: str) -> SFTRow:
        if not isinstance(d, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(d).__name__}")
        if "messages" not in d:
            raise ValueError(f"{where}: an SFT row needs a 'messages' list (keys found: {sorted(d)})")
        messages = _messages(d["messages"], f"{where}: messages")
        if not any(m["role"] == "assistant" for m in messages):
            raise ValueError(f"{where}: messages: no assistant turn, nothing to learn from")
        return cls(messages=messages, images=_image_list(d.get("images"), where, _users(messages)),
                   meta=_meta(d.get("meta"), where), rendered_for=_rendered_for(d, where))


@dataclass
class DPORow:
    """A preference pair: ``chosen`` (a person's turn) over ``rejected`` (the model's), after ``prompt``."""

    prompt: list[dict]
    chosen: list[dict]
    rejected: list[dict]
    images: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    rendered_for: RenderedFor | None = None

    def to_dict(self) -> dict:
        return _with_rendered_for({"prompt": self.prompt, "chosen": self.chosen, "rejected": self.rejected,
                                   "images": self.images, "meta": self.meta}, self.rendered_for)

    @classmethod
    def from_dict(cls, d: object, where: str) -> DPORow:
        if not isinstance(d, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(d).__name__}")
        missing = [k for k in ("prompt", "chosen", "rejected") if k not in d]
        if missing:
            raise ValueError(f"{where}: a DPO row needs prompt, chosen and rejected; missing {missing}")
        prompt = _messages(d["prompt"], f"{where}: prompt")
        return cls(prompt=prompt, chosen=_messages(d["chosen"], f"{where}: chosen", assistant_only=True),
                   rejected=_messages(d["rejected"], f"{where}: rejected", assistant_only=True),
                   images=_image_list(d.get("images"), where, _users(prompt)), meta=_meta(d.get("meta"), where),
                   rendered_for=_rendered_for(d, where))


REWARD_KINDS = ("action", "env")


def _size(value: object, name: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {name} is the screenshot's size in whole pixels, got {value!r}")
    return value


@dataclass
class GRPORow:
    """One step to sample answers to (GRPO through TRL, trainer/grpo.py): the prompt up to the user turn the answer
    replies to, its screenshots (the current screen's last; none for a text model), the format answers are read in and
    the screen's size (None: read from the screenshot), and ``reward``: ``{"kind": "env", "env", "task", "seed",
    "prefix": [canonical actions]}`` (and ``"definition"``, an authored task's JSON) or ``{"kind": "action",
    "action", "box" | "element", ...}`` (trainer/grpo.py checks the rest of the spec)."""

    messages: list[dict]
    images: list[str]
    format: str
    reward: dict
    width: int | None = None
    height: int | None = None
    meta: dict = field(default_factory=dict)
    rendered_for: RenderedFor | None = None

    @staticmethod
    def env_reward(env: str, task: str, seed: int, prefix: Sequence[Action], definition: dict | None = None) -> dict:
        """The env reward spec of a step reached by ``prefix`` from the seeded episode's start; with ``definition``,
        the JSON of a task written as JSON (an authored task), which the trainer's env learns before it resets."""
        spec = {"kind": "env", "env": env, "task": task, "seed": seed, "prefix": [a.to_text() for a in prefix]}
        return spec if definition is None else {**spec, "definition": definition}

    def to_dict(self) -> dict:
        size = {"width": self.width, "height": self.height} if self.width is not None else {}
        return _with_rendered_for({"messages": self.messages, "images": self.images, "format": self.format, **size,
                                   "reward": self.reward, "meta": self.meta}, self.rendered_for)

    @classmethod
    def from_dict(cls, d: object, where: str) -> GRPORow:
        if not isinstance(d, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(d).__name__}")
        if "messages" not in d:
            raise ValueError(f"{where}: an RL row needs a 'messages' prompt (keys found: {sorted(d)})")
        messages = _messages(d["messages"], f"{where}: messages")
        if messages[-1]["role"] != "user":
            raise ValueError(f"{where}: messages must end with the user turn the answer replies to, "
                             f"not a {messages[-1]['role']} turn")
        images = _image_list(d.get("images"), where, _users(messages))  # none for a text model's row
        try:
            answer_format = formats.check_format(d.get("format"))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        width, height = _size(d.get("width"), "width", where), _size(d.get("height"), "height", where)
        if (width is None) != (height is None):
            raise ValueError(f"{where}: give both width and height (the screenshot's size) or neither")
        reward = d.get("reward")
        if not isinstance(reward, dict):
            raise ValueError(f"{where}: an RL row needs 'reward', an object saying how an answer is scored "
                             f"(kind: {' or '.join(REWARD_KINDS)})")
        if reward.get("kind") not in REWARD_KINDS:
            raise ValueError(f"{where}: unknown reward kind {reward.get('kind')!r}; expected one of: "
                             f"{', '.join(REWARD_KINDS)}")
        rendered_for = _rendered_for(d, where)
        if rendered_for is not None and rendered_for.action_format != answer_format:
            raise ValueError(f"{where}: format is {answer_format} but the row was rendered for "
                             f"{rendered_for.action_format} answers")
        return cls(messages=messages, images=images, format=answer_format, reward=reward, width=width, height=height,
                   meta=_meta(d.get("meta"), where), rendered_for=rendered_for)


def prompt_text(messages: Sequence[dict]) -> str:
    """Chat messages as one string, for trainers that take a plain-text prompt (TRL's PRMTrainer tokenizes
    ``prompt`` as it is): each message as ``<|role|>`` on a line then its content, and an open ``<|assistant|>``
    turn last, where the completion follows."""
    return "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"


@dataclass
class PRMRow:
    """A process-reward row (TRL's stepwise supervision): after ``prompt``, each completion is a step, each label
    says whether that step was good."""

    prompt: str
    completions: list[str]
    labels: list[bool]
    prompt_messages: list[dict] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    rendered_for: RenderedFor | None = None

    def to_dict(self) -> dict:
        return _with_rendered_for({"prompt": self.prompt, "completions": self.completions, "labels": self.labels,
                                   "prompt_messages": self.prompt_messages, "images": self.images,
                                   "meta": self.meta}, self.rendered_for)

    @classmethod
    def from_dict(cls, d: object, where: str) -> PRMRow:
        if not isinstance(d, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(d).__name__}")
        missing = [k for k in ("prompt", "completions", "labels") if k not in d]
        if missing:
            raise ValueError(f"{where}: a PRM row needs prompt, completions and labels; missing {missing}")
        if not isinstance(d["prompt"], str) or not d["prompt"]:
            raise ValueError(f"{where}: prompt must be a non-empty string (the prompt as text)")
        completions, labels = d["completions"], d["labels"]
        if not isinstance(completions, list) or not completions or not all(isinstance(c, str) for c in completions):
            raise ValueError(f"{where}: completions must be a non-empty list of strings (one a step)")
        if not isinstance(labels, list) or not all(isinstance(label, bool) for label in labels):
            raise ValueError(f"{where}: labels must be a list of true / false (one a step)")
        if len(labels) != len(completions):
            raise ValueError(f"{where}: {len(completions)} completions but {len(labels)} labels; give one label a step")
        prompt_messages = (_messages(d["prompt_messages"], f"{where}: prompt_messages")
                           if d.get("prompt_messages") else [])
        images = _image_list(d.get("images"), where, _users(prompt_messages))  # they go with prompt_messages' turns
        return cls(prompt=d["prompt"], completions=list(completions), labels=list(labels),
                   prompt_messages=prompt_messages, images=images, meta=_meta(d.get("meta"), where),
                   rendered_for=_rendered_for(d, where))


_KINDS = {"sft": SFTRow, "ct": SFTRow, "dpo": DPORow, "rl": GRPORow, "grpo": GRPORow, "prm": PRMRow}


def row_from_dict(kind: str, d: object, where: str) -> SFTRow | DPORow | GRPORow | PRMRow:
    """A row of ``kind`` (sft, ct, dpo, rl, prm; grpo: another name of rl's step rows), validated."""
    if kind not in _KINDS:
        raise ValueError(f"{where}: unknown row kind {kind!r}; expected one of: {', '.join(_KINDS)}")
    return _KINDS[kind].from_dict(d, where)
