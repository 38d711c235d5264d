"""Personal data found by kind: the detectors core/redaction.py runs, one class a kind.

Detectors, in the order they claim text (a span one claimed is not looked at again): secrets by known prefix,
email addresses, IBANs, payment cards, national ids, IP addresses, phone numbers, the project's own patterns and
word lists (names, customers, anything the project knows to be private), and last secrets by entropy.

Libraries: phonenumbers (Google's libphonenumber; which digit runs are phone numbers is the detector a regex gets
most wrong) and python-stdnum (the check digits of IBANs, card numbers (Luhn) and US social security numbers):
both are maintained, pure Python and load no model. Microsoft Presidio was not chosen: its recognisers run on a
spaCy model that has to be downloaded, and what it adds over these (person names by NER) is what a project's word
list does here without a model."""
from __future__ import annotations

import ipaddress
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


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
