"""Personal data in what Loupe stores and exports: found by kind, and replaced by its kind's label.

Detectors, in the order they claim text (a span one claimed is not looked at again): secrets by known prefix,
email addresses, IBANs, payment cards, national ids, IP addresses, phone numbers, the project's own patterns and
word lists (names, customers, anything the project knows to be private), and last secrets by entropy.

Libraries: phonenumbers (Google's libphonenumber; which digit runs are phone numbers is the detector a regex gets
most wrong) and python-stdnum (the check digits of IBANs, card numbers (Luhn) and US social security numbers):
both are maintained, pure Python and load no model. Microsoft Presidio was not chosen: its recognisers run on a
spaCy model that has to be downloaded, and what it adds over these (person names by NER) is what a project's word
list does here without a model.

What this module does with the hits: ``text_redact`` (a text), ``value_redact`` (any JSON: rows, payloads),
``element_boxes`` and ``image_redact`` (a screenshot, filled over the boxes of the elements whose text matched),
``word_spans`` and ``pcm_silence`` (speech: the words that matched, silenced). The policy comes from a project's
``settings["redaction"]`` (``policy_of``); redaction is on unless a project switched it off. It imports no app:
callers pass the settings and the elements."""
from __future__ import annotations

import hashlib
import io
import ipaddress
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from core.errors import ApplicationError

MAX_PATTERNS = 50
MAX_WORDS = 2000


@dataclass(frozen=True)
class Hit:
    """One piece of personal data: its kind (``email``, ...; a project pattern's own name), where it is, what it is."""

    kind: str
    start: int
    end: int
    value: str

    @property
    def label(self) -> str:
        return f"[{self.kind.upper()}]"


class Detector:
    """One kind of personal data. ``find`` yields (start, end) of each occurrence in ``text``."""

    kind: str

    def find(self, text: str) -> Iterable[tuple[int, int]]:
        raise NotImplementedError


class RegexDetector(Detector):
    """Occurrences of ``pattern`` that ``valid`` accepts (a check digit, a parse)."""

    pattern: re.Pattern

    def valid(self, value: str) -> bool:
        return True

    def find(self, text):
        for match in self.pattern.finditer(text):
            if self.valid(match.group(0)):
                yield match.start(), match.end()


class Email(RegexDetector):
    kind = "email"
    pattern = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")


class Iban(RegexDetector):
    kind = "iban"
    pattern = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")

    def valid(self, value):
        from stdnum import iban

        return iban.is_valid(value)


class Card(RegexDetector):
    """13 to 19 digits, spaced or dashed in any groups, starting as the card networks' numbers do (2-6: Mastercard,
    Amex, Diners, JCB, Visa, Discover, UnionPay, Maestro), whose Luhn check holds: an order number whose check fails,
    and a book's ISBN (978..., a tenth of which pass Luhn), are left alone."""

    kind = "card"
    pattern = re.compile(r"(?<![\d-])[2-6](?:[ -]?\d){12,18}(?![\d])")

    def valid(self, value):
        from stdnum import luhn

        digits = re.sub(r"\D", "", value)
        return 13 <= len(digits) <= 19 and luhn.is_valid(digits)


class NationalId(Detector):
    """National ids whose written form is unambiguous, each checked where it has a check: US social security
    numbers written 123-45-6789 (stdnum refuses the numbers never issued: 000, 666, 9xx), UK National Insurance
    numbers (two letters of the prefixes HMRC issues, six digits, A-D), Spanish DNI and NIE (their check letter)
    and Italian codici fiscali (their check character). Ids that are bare digit groups with a one-in-ten check
    (Canada's SIN, India's Aadhaar, the NHS number) are left to a project pattern: they would catch order and phone
    numbers."""

    kind = "national_id"
    CHECKS = (
        (re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])"), "stdnum.us.ssn"),
        (re.compile(r"(?<![A-Za-z0-9])(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2}"
                    r" ?[A-D](?![A-Za-z0-9])"), None),
        (re.compile(r"(?<![A-Za-z0-9-])\d{8}-?[A-Z](?![A-Za-z0-9])"), "stdnum.es.dni"),
        (re.compile(r"(?<![A-Za-z0-9-])[XYZ]-?\d{7}-?[A-Z](?![A-Za-z0-9])"), "stdnum.es.nie"),
        (re.compile(r"(?<![A-Za-z0-9])[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z](?![A-Za-z0-9])"),
         "stdnum.it.codicefiscale"),
    )

    def find(self, text):
        import importlib

        for pattern, module in self.CHECKS:
            for match in pattern.finditer(text):
                if module is None or importlib.import_module(module).is_valid(match.group(0)):
                    yield match.start(), match.end()


class IpAddress(RegexDetector):
    """IPv4 and IPv6 addresses, except loopback and unspecified ones (a test server's 127.0.0.1 is nobody's)."""

    kind = "ip"
    pattern = re.compile(r"(?<![\w.:])(?:(?:\d{1,3}\.){3}\d{1,3}|(?=[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:)"
                         r"[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7})(?![\w.:])")

    def valid(self, value):
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return False
        return not (address.is_loopback or address.is_unspecified)


# Seven digits or more with at most a few separators between each (spaces, dashes, dots, brackets, a slash): where a
# phone number can stand. Coordinates and ids ("click(x=80, y=100)") have letters between their digits.
_PHONE_DIGITS = re.compile(r"\d(?:[^\w\n]{0,4}\d){6,}")


class Phone(Detector):
    """Phone numbers as libphonenumber reads them (valid for their region; a national number read as ``region``'s)."""

    kind = "phone"

    def __init__(self, region: str = "US") -> None:
        self.region = region

    def find(self, text):
        import phonenumbers

        if not _PHONE_DIGITS.search(text):  # libphonenumber's matcher is most of a snapshot build's time
            return
        for match in phonenumbers.PhoneNumberMatcher(text, self.region, leniency=phonenumbers.Leniency.VALID):
            yield match.start, match.end


# Keys and tokens by their issuers' prefixes: OpenAI, Stripe, GitHub, GitLab, Slack, AWS, Google, JWTs, PEM keys.
_SECRET_PREFIXES = re.compile(
    r"(?:sk-(?:proj-)?[A-Za-z0-9_-]{20,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{36,}"
    r"|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|A(?:KIA|SIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{35}|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----)")


class SecretPrefix(RegexDetector):
    kind = "secret"
    pattern = _SECRET_PREFIXES


class SecretEntropy(RegexDetector):
    """A run of 24+ token characters mixing upper case, lower case and digits, with at least 4.2 bits of entropy a
    character: a random key, not a word, a camel-cased name or a hex digest (content hashes are not secrets)."""

    kind = "secret"
    pattern = re.compile(r"(?<![A-Za-z0-9+_=-])[A-Za-z0-9+_=-]{24,}(?![A-Za-z0-9+_=-])")

    def valid(self, value):
        if not (re.search(r"[A-Z]", value) and re.search(r"[a-z]", value) and re.search(r"\d", value)):
            return False
        counts = Counter(value)
        entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
        return entropy >= 4.2


class Pattern(RegexDetector):
    """A project's own pattern, named (its hits are labelled with the name)."""

    def __init__(self, name: str, regex: str) -> None:
        self.kind, self.pattern = name, re.compile(regex)


class Words(RegexDetector):
    """A project's word list (names, customers, places), matched whole and in any case."""

    kind = "name"

    def __init__(self, words: Sequence[str]) -> None:
        alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
        self.pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


# Built-in kinds, in the order they claim text.
DETECTORS: dict[str, type[Detector]] = {d.kind: d for d in (Email, Iban, Card, NationalId, IpAddress, Phone)}
KINDS = ("secret", *DETECTORS, "name")

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
