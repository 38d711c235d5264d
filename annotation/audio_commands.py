"""Voice steering: a short utterance from a fixed grammar, recognised in the think-aloud words, becomes the command
the key for it sends (approve, reject with a reason, take over, hand back, pause, resume, finish with an outcome).

An utterance is a run of words with no pause of GAP_S or more inside it. It is a command only when the whole
utterance is one: "approve", "reject, that is the wrong button", "take over", "hand back", "pause", "resume",
"finish with success". Anything else ("I would approve this", "finish" with no outcome, "reject" inside a sentence)
stays think-aloud, and nothing is done on it. A command's words are never also part of a thought.

Django-free, so the audio benchmark runs it on its own (bench/bench_audio.py --commands)."""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

GAP_S = 0.9  # a pause this long ends an utterance (a comma's pause is about a quarter of it)
MAX_WORDS = 24  # an utterance longer than this is speech, not a command

OUTCOMES = {"success": "success", "successful": "success", "succeeded": "success", "done": "success",
            "failure": "failure", "failed": "failure", "fail": "failure",
            "infeasible": "infeasible", "impossible": "infeasible"}

# Each command's words as Whisper writes them (the grammar's variants are the spellings it gives for the phrase).
_EXACT = {
    ("approve",): "approve", ("approved",): "approve", ("approve", "it"): "approve", ("approve", "that"): "approve",
    ("take", "over"): "takeover", ("takeover",): "takeover", ("take-over",): "takeover",
    ("hand", "back"): "handback", ("handback",): "handback", ("hand-back",): "handback",
    ("pause",): "pause", ("paused",): "pause", ("resume",): "resume", ("continue",): "resume",
}
_REJECT = frozenset({"reject", "rejected", "rejects"})
_FINISH = frozenset({"finish", "finished", "finnish"})
_FILLER = frozenset({"with", "as", "a", "the", "it", "outcome", "episode"})
_STARTERS = frozenset({w[0] for w in _EXACT} | _REJECT | _FINISH)

# Whisper's prompt while voice commands are on: the grammar's words, and a reason as one is said, so that "Approve."
# said alone is read as that (tiny.en, unprompted, reads espeak's "Approve." as "a prove" or "That's rude.", and
# without "failure" in the prompt it read "Finish as failure." at 140 words a minute as "Finish after earlier."). A
# reason names a screen's parts: without "button" here, a loaded machine's chunking once made "the wrong button"
# "the wrong purpose".
PROMPT = ("Approve. Reject, it typed in the wrong field. Reject, wrong button. Take over. Hand back. Pause. Resume. "
          "Finish with success. Finish as failure.")


@dataclass(frozen=True)
class VoiceCommand:
    """A recognised command: ``type`` as the socket names it, and what the command needs besides."""

    type: str
    reason: str = ""
    outcome: str = ""

    def payload(self) -> dict:
        out = {"type": self.type}
        if self.type == "reject":
            out["reason"] = self.reason
        if self.type == "finish":
            out["outcome"] = self.outcome
        return out


def _norm(word: str) -> str:
    return re.sub(r"[^\w'-]+", "", word.lower()).strip("-'")


def command_of(text: str) -> VoiceCommand | None:
    """The command a whole utterance is, or None (speech, or a command the grammar cannot read for sure)."""
    raw = text.split()
    words = [w for w in (_norm(w) for w in raw) if w]
    if not words or len(words) > MAX_WORDS:
        return None
    if tuple(words) in _EXACT:
        return VoiceCommand(_EXACT[tuple(words)])
    if words[0] in _REJECT:
        # The reason is the rest of the sentence as spoken, without the pause's punctuation around it.
        rest = text.strip()[len(raw[0]) if raw[0].lower().startswith(words[0]) else 0:]
        rest = rest.lstrip(" ,.;:-!").rstrip(" .!")
        rest = re.sub(r"^(?:because|since)\s+", "", rest, flags=re.IGNORECASE)
        if rest[:1].isupper() and rest.split()[0] != "I" and not rest[1:2].isupper():
            rest = rest[0].lower() + rest[1:]  # capitalised by Whisper after a full stop, not by the speaker
        return VoiceCommand("reject", reason=rest)
    if words[0] in _FINISH:
        outcome = [OUTCOMES[w] for w in words[1:] if w in OUTCOMES]
        others = [w for w in words[1:] if w not in OUTCOMES and w not in _FILLER]
        if len(outcome) == 1 and not others:
            return VoiceCommand("finish", outcome=outcome[0])
    return None


def utterances(words: Sequence[tuple[str, float, float]], gap_s: float = GAP_S) -> list[list[int]]:
    """Positions of ``words`` ((text, start, end), in time order) grouped into utterances by pauses of gap_s."""
    groups: list[list[int]] = []
    for position, (_, start, _end) in enumerate(words):
        if groups and start - words[groups[-1][-1]][2] < gap_s:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


def commands_in(words: Sequence[tuple[str, float, float]],
                gap_s: float = GAP_S) -> list[tuple[VoiceCommand, list[int]]]:
    """Each utterance of ``words`` that is a command, with its words' positions (which then are no thought)."""
    found = []
    for group in utterances(words, gap_s):
        command = command_of(" ".join(words[p][0].strip() for p in group))
        if command is not None:
            found.append((command, group))
    return found


def held_from(words: Sequence[tuple[str, float, float]], committed_until: float,
              gap_s: float = GAP_S) -> int | None:
    """Where to stop committing an increment's words, so that a command still being spoken is read whole next time:
    the position of its last utterance when that starts like a command, ends less than gap_s before the committed
    mark (the speaker may go on), and is not yet a command that cannot grow (a bare or half-said reject, a finish
    with no outcome, "take" or "hand" alone). None: commit them all."""
    groups = utterances(words, gap_s)
    if not groups:
        return None
    last = groups[-1]
    first = _norm(words[last[0]][0])
    if first not in _STARTERS or committed_until - words[last[-1]][2] >= gap_s:
        return None
    command = command_of(" ".join(words[p][0] for p in last))
    if command is not None and command.type != "reject":
        return None
    return last[0]
