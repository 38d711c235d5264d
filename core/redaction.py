"""Personal data in what Loupe stores and exports: found by kind, and replaced by its kind's label.

What this module does with the hits: ``text_redact`` (a text), ``value_redact`` (any JSON: rows, payloads),
``element_boxes`` and ``image_redact`` (a screenshot, filled over the boxes of the elements whose text matched),
``word_spans`` and ``pcm_silence`` (speech: the words that matched, silenced). The policy comes from a project's
``settings["redaction"]`` (``policy_of``); redaction is on unless a project switched it off. It imports no app:
callers pass the settings and the elements."""
from __future__ import annotations

import hashlib
import io
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from core.detectors import (DETECTORS, KINDS, MAX_PATTERNS, MAX_WORDS, Detector, Hit, Pattern, Phone, SecretEntropy,
                            SecretPrefix, Words)
from core.errors import ApplicationError

# Element text is cut short with '...' before its closing quote in prompts (agent/envs/base.py Element.to_text, the
# named style): the cut word may be the start of an address, a number or a key that no longer parses as one, so the
# cut word is always replaced, and the start of a listed name before it too. Only in an element's line (its closing
# quote followed by its centre, agent/prompt.py's styles): a thought's "Loading..." or a system prompt's
# type(text="...") is no cut.
_CUT = re.compile(r'([^\s"]+)\.\.\."(?= at \(| x=)')


@dataclass(frozen=True)
class Policy:
    """What a project redacts. Steps, rejections and review comments are stored redacted (rollouts/privacy.py), so
    what reviewers, replays and exports read is; ``keep_originals`` keeps what redaction changed apart, readable
    by the project's admins only, each read audited."""

    enabled: bool = True
    kinds: tuple[str, ...] = KINDS
    patterns: tuple[tuple[str, str], ...] = ()
    words: tuple[str, ...] = ()
    region: str = "US"
    keep_originals: bool = False
    detectors: tuple[Detector, ...] = field(default=(), compare=False, repr=False)

    def to_dict(self) -> dict:
        return {"enabled": self.enabled, "kinds": list(self.kinds), "patterns": [list(p) for p in self.patterns],
                "words": list(self.words), "region": self.region, "keep_originals": self.keep_originals}

    @property
    def digest(self) -> str:
        """What identifies what the policy hides: a snapshot made under another policy is another snapshot
        (keeping originals apart changes nothing a snapshot holds)."""
        hidden = {k: v for k, v in self.to_dict().items() if k != "keep_originals"}
        return hashlib.sha256(json.dumps(hidden, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def labels(self) -> re.Pattern:
        """The labels this policy writes in place of what it hides ('[EMAIL]', '[CUSTOMER_ID]', '[CUT]')."""
        return _labels(tuple(sorted({*self.kinds, *(name for name, _ in self.patterns), "cut"})))


@lru_cache(maxsize=64)
def _labels(names: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"\[(?:" + "|".join(re.escape(n.upper()) for n in names) + r")\]")


def policy_clean(raw: dict | None) -> dict:
    """A project's redaction settings, checked: unknown kinds, patterns that do not compile or match the empty
    text, and lists past their limits are refused with what to change (ApplicationError)."""
    raw = dict(raw or {})
    unknown = set(raw) - {"enabled", "kinds", "patterns", "words", "region", "keep_originals"}
    if unknown:
        raise ApplicationError(f"Unknown redaction settings: {', '.join(sorted(unknown))}.")
    kinds = raw.get("kinds", list(KINDS))
    if not isinstance(kinds, list) or any(k not in KINDS for k in kinds):
        raise ApplicationError(f"Redaction kinds must be a list of: {', '.join(KINDS)}.")
    patterns = raw.get("patterns", [])
    if not isinstance(patterns, list) or len(patterns) > MAX_PATTERNS:
        raise ApplicationError(f"Patterns must be a list of at most {MAX_PATTERNS} [name, regex] pairs.")
    for entry in patterns:
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and all(isinstance(p, str) for p in entry)
                and re.fullmatch(r"[a-z][a-z0-9_]{0,31}", entry[0])):
            raise ApplicationError(f"Pattern {entry!r}: give [name, regex], the name in lower case letters, digits "
                                   "and _ (it labels what it hides).")
        try:
            compiled = re.compile(entry[1])
        except re.error as exc:
            raise ApplicationError(f"Pattern '{entry[0]}' is not a regular expression: {exc}.") from None
        if compiled.search(""):
            raise ApplicationError(f"Pattern '{entry[0]}' matches empty text; it would hide nothing and match "
                                   "everywhere.")
    words = raw.get("words", [])
    if not isinstance(words, list) or len(words) > MAX_WORDS or any(
            not isinstance(w, str) or not w.strip() for w in words):
        raise ApplicationError(f"Words must be a list of at most {MAX_WORDS} non-empty texts.")
    region = raw.get("region", "US")
    if not (isinstance(region, str) and re.fullmatch(r"[A-Z]{2}", region)):
        raise ApplicationError("Region must be a two-letter country code, like US or DE (how phone numbers "
                               "without a country code are read).")
    for flag in ("enabled", "keep_originals"):
        if not isinstance(raw.get(flag, flag == "enabled"), bool):
            raise ApplicationError(f"'{flag}' must be true or false.")
    return {"enabled": raw.get("enabled", True), "kinds": kinds, "patterns": [list(p) for p in patterns],
            "words": [w.strip() for w in words], "region": region, "keep_originals": raw.get("keep_originals", False)}


def policy_of(settings: dict | None) -> Policy:
    """The policy a project's settings hold (``settings["redaction"]``); the default redacts every built-in kind.
    A snapshot's lineage holds the policy it was made under the same way (``lineage["redaction"]``)."""
    raw = (settings or {}).get("redaction") or {}
    return _policy(json.dumps(raw, sort_keys=True))


def snapshot_record(settings: dict | None) -> dict:
    """What a snapshot records of the policy that made it (its lineage's ``redaction``, exported with it): the
    digest, which is part of the snapshot's key (a policy change makes a new snapshot), and what the policy does,
    without its words and patterns (a word list of names is itself personal data)."""
    policy = policy_of(settings)
    return {"digest": policy.digest, "enabled": policy.enabled, "kinds": list(policy.kinds), "region": policy.region,
            "patterns": [name for name, _ in policy.patterns], "words": len(policy.words)}


@lru_cache(maxsize=64)
def _policy(raw_json: str) -> Policy:
    cleaned = policy_clean(json.loads(raw_json))
    policy = Policy(enabled=cleaned["enabled"], kinds=tuple(cleaned["kinds"]),
                    patterns=tuple(tuple(p) for p in cleaned["patterns"]), words=tuple(cleaned["words"]),
                    region=cleaned["region"], keep_originals=cleaned["keep_originals"])
    detectors: list[Detector] = []
    if "secret" in policy.kinds:
        detectors.append(SecretPrefix())
    for kind, detector in DETECTORS.items():
        if kind in policy.kinds:
            detectors.append(detector(policy.region) if detector is Phone else detector())
    detectors.extend(Pattern(name, regex) for name, regex in policy.patterns)
    if policy.words and "name" in policy.kinds:
        detectors.append(Words(policy.words))
    if "secret" in policy.kinds:
        detectors.append(SecretEntropy())
    return Policy(**{**policy.__dict__, "detectors": tuple(detectors)})


DEFAULT = policy_of(None)


def hits(text: str, policy: Policy = DEFAULT) -> list[Hit]:
    """The personal data in ``text``, in order, never overlapping (the first detector to claim a span keeps it)."""
    if not policy.enabled or not text:
        return []
    found: list[Hit] = []
    for detector in policy.detectors:
        for start, end in detector.find(text):
            if end > start and not any(h.start < end and start < h.end for h in found):
                found.append(Hit(detector.kind, start, end, text[start:end]))
    return sorted(found, key=lambda h: h.start)


def text_redact(text: str, policy: Policy = DEFAULT) -> str:
    """``text`` with each hit replaced by its label ('[EMAIL]'), and an address or number cut short by '...'."""
    if not policy.enabled or not text:
        return text
    out, at = [], 0
    for hit in hits(text, policy):
        out.append(text[at:hit.start])
        out.append(hit.label)
        at = hit.end
    out.append(text[at:])
    return _cut_redact("".join(out), policy)


def _cut_redact(text: str, policy: Policy) -> str:
    out, at = [], 0
    for match in _CUT.finditer(text):
        head = text[:match.end(1)]
        start = match.start(1)
        if head.endswith("]") and head[:-1].rstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ_").endswith("["):
            continue  # a label already stands there
        for word in policy.words:
            for k in range(len(word) - 1, 2, -1):
                begin = len(head) - k
                if head.lower().endswith(word[:k].lower()) and (begin == 0 or not head[begin - 1].isalnum()):
                    start = min(start, begin)
                    break
        out.append(text[at:start])
        out.append('[CUT]..."')
        at = match.end()
    out.append(text[at:])
    return "".join(out)


# Row fields that hold storage paths or image parts (a prompt's image_url), not text a person wrote or saw.
_PATH_KEYS = frozenset({"image", "images", "screenshot", "file", "image_url"})


@lru_cache(maxsize=4096)
def _text_redact_remembered(text: str, policy: Policy) -> str:
    """text_redact, remembered: a snapshot's rows repeat their texts (each row's prompt holds the turns of the steps
    before it), and finding phone numbers is most of a build's time (README, Sizing)."""
    return text_redact(text, policy)


def value_redact(value, policy: Policy = DEFAULT):
    """Any JSON value with every string in it redacted (keys kept; storage paths left alone)."""
    if not policy.enabled:
        return value
    if isinstance(value, str):
        return _text_redact_remembered(value, policy)
    if isinstance(value, list):
        return [value_redact(v, policy) for v in value]
    if isinstance(value, dict):
        return {k: v if k in _PATH_KEYS else value_redact(v, policy) for k, v in value.items()}
    return value


def _recorded(lineage: dict | None) -> str | None:
    return ((lineage or {}).get("redaction") or {}).get("digest")


def rows_redact(rows: list[dict], lineage: dict | None, settings: dict | None) -> list[dict]:
    """A batch of a snapshot's rows as the project's policy lets them leave (the snapshot build's hook). A build
    whose project changed its policy since the snapshot was asked for is refused (ApplicationError): the
    snapshot would hold rows of a policy it does not record."""
    policy = policy_of(settings)
    recorded = _recorded(lineage)
    if recorded and recorded != policy.digest:
        raise ApplicationError("The project's redaction policy changed after this snapshot was asked for; freeze "
                               "the data again to make a snapshot under the new policy.")
    redacted = value_redact(rows, policy)
    return rows if redacted == rows else tokens_dropped(rows, redacted)  # most rows hold nothing to hide


_TOKEN_KEYS = {"output_token_ids": "output", "token_ids": "raw_output", "old_logprobs": "output",
               "token_logprobs": "raw_output"}


def tokens_dropped(original, redacted):
    """``redacted`` without the token ids (and their logprobs) of any output redaction changed: they would spell
    what was hidden. Empty ids are re-tokenized from the text by the trainer (trainer/data.py)."""
    if isinstance(redacted, list):
        return [tokens_dropped(o, r) for o, r in zip(original, redacted)]
    if isinstance(redacted, dict):
        out = {k: tokens_dropped(original.get(k), v) if isinstance(v, (dict, list)) and k not in _TOKEN_KEYS else v
               for k, v in redacted.items()}
        for key, text_key in _TOKEN_KEYS.items():
            if out.get(key) and original.get(text_key) != redacted.get(text_key):
                out[key] = []
        return out
    return redacted


# --- screenshots -------------------------------------------------------------------------------------
PAD = 2  # pixels around an element's box, for anti-aliased glyphs at its edge


def element_boxes(elements: Iterable[dict], policy: Policy = DEFAULT) -> list[tuple[int, int, int, int]]:
    """(left, top, right, bottom) of each element (agent.envs.base.Element.to_dict: centre x, y and size) whose
    text holds personal data, or a label that stands for it (elements stored redacted: a branch's copy of a step
    redacts its own screen by its parent's elements), padded by PAD."""
    boxes = []
    for element in elements or ():
        text, width, height = element.get("text") or "", element.get("width") or 0, element.get("height") or 0
        if width > 0 and height > 0 and policy.enabled and (hits(text, policy) or policy.labels.search(text)):
            left, top = element["x"] - width / 2, element["y"] - height / 2
            boxes.append((math.floor(left) - PAD, math.floor(top) - PAD, math.ceil(left + width) + PAD,
                          math.ceil(top + height) + PAD))
    return sorted(set(boxes))


def image_redact(data: bytes, boxes: Sequence[tuple[int, int, int, int]]) -> bytes:
    """The image with each box filled black, in its own format (JPEG or PNG)."""
    from PIL import Image, ImageDraw

    with Image.open(io.BytesIO(data)) as image:
        fmt = image.format or "PNG"
        image = image.convert("RGB")
        draw = ImageDraw.Draw(image)
        for left, top, right, bottom in boxes:
            draw.rectangle((max(0, left), max(0, top), min(image.width, right) - 1, min(image.height, bottom) - 1),
                           fill=(0, 0, 0))
        out = io.BytesIO()
        image.save(out, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return out.getvalue()


def screenshot_redacted(name: str, lineage: dict | None, settings: dict | None,
                        elements_of_steps: Iterable[list]) -> str:
    """The storage name of ``name``'s copy with every matching element filled (made once, addressed by what it
    was made from), or ``name`` itself when nothing on it matched or the policy is off (the export's hook).
    Screenshots are redacted at export by the project's policy; by it switched on, whatever it says, when it is not
    the one the snapshot (``lineage``) was made under. ``elements_of_steps``: the elements of each step that showed
    this screenshot (a file may be several steps' screen)."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    policy = policy_of(settings)
    if _recorded(lineage) != policy.digest:
        policy = replace(policy, enabled=True)
    boxes = sorted({box for elements in elements_of_steps for box in element_boxes(elements, policy)})
    if not boxes or not policy.enabled:
        return name
    key = hashlib.sha256(json.dumps([name, boxes]).encode()).hexdigest()
    suffix = name.rsplit(".", 1)[-1] if "." in name else "img"
    redacted = f"redacted/{key[:2]}/{key}.{suffix}"
    if not default_storage.exists(redacted):
        with default_storage.open(name, "rb") as handle:
            default_storage.save(redacted, ContentFile(image_redact(handle.read(), boxes)))
    return redacted


# --- speech ------------------------------------------------------------------------------------------
def word_spans(words: Sequence[tuple[str, float, float]], policy: Policy = DEFAULT) -> list[tuple[int, str]]:
    """(position, kind) of each spoken word that is part of personal data, read across word boundaries
    ('five five five, one two ...' transcribed as '555-123-4567' or as separate words alike)."""
    text, starts = "", []
    for word, _start, _end in words:
        starts.append(len(text) + (1 if text else 0))
        text = f"{text} {word.strip()}" if text else word.strip()
    found = []
    for hit in hits(text, policy):
        for position, begin in enumerate(starts):
            end = begin + len(words[position][0].strip())
            if begin < hit.end and hit.start < end:
                found.append((position, hit.kind))
    return found


def pcm_silence(pcm, sample_rate: int, spans: Iterable[tuple[float, float]], pad_s: float = 0.05):
    """A copy of mono PCM (a numpy array) with each (start, end) span in seconds, padded, set to silence."""
    out = pcm.copy()
    for start, end in spans:
        lo = max(0, int((start - pad_s) * sample_rate))
        hi = min(len(out), int(math.ceil((end + pad_s) * sample_rate)))
        out[lo:hi] = 0
    return out
