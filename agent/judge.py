"""A judge of whole episodes (V(s) where no rule checks the task): its prompt, its strict answer format and
k-sample voting, Django-free.

A judge reads what a person reviewing would: the instruction, the actions (with the model's thoughts), the final
answer and the last K screenshots, and answers in two lines::

    Verdict: success            (or: failure)
    Reason: <one sentence>

Anything else (prose, a missing reason, an empty answer, a timeout) is *no verdict*, recorded with why: a judge
that cannot be read must never route an episode. :func:`judge_votes` asks a :class:`~agent.policies.Policy`
k times (sampling at the given temperature) and takes the majority; its share of the k samples is the
confidence, so a garbled sample counts against it. A tie is no verdict.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.images import image_url
from agent.policies.base import Policy, PolicyOutput

__all__ = ["SUCCESS", "FAILURE", "NO_VERDICT", "EpisodeForJudge", "Vote", "Judgement", "ScriptedJudgePolicy",
           "judge_messages", "parse_verdict", "judge_votes", "tally"]

SUCCESS, FAILURE, NO_VERDICT = "success", "failure", ""

JUDGE_SYSTEM = (
    "You judge whether a GUI agent completed the task it was given. You see the instruction, the actions it took "
    "(with its thoughts), its final answer and its last screenshots. Judge only by what the screenshots and "
    "actions show, not by what the agent claims.\n"
    "Answer in exactly two lines and nothing else:\n"
    "Verdict: success   (or: Verdict: failure)\n"
    "Reason: <one sentence saying what shows it>")

_VERDICT = re.compile(r"^verdict:\s*(success|failure)\s*\.?$", re.IGNORECASE)
_REASON = re.compile(r"^reason:\s*(\S.*)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class EpisodeForJudge:
    """What a judge sees of one episode. ``actions`` are the steps' canonical action texts in order (a void turn
    as ``(no action: <why>)``), ``thoughts`` beside them; ``screenshots`` the last K screenshots, oldest first,
    each with the index of the step it was taken before."""

    instruction: str
    actions: Sequence[str]
    thoughts: Sequence[str] = ()
    final_answer: str = ""
    screenshots: Sequence[tuple[int, bytes]] = ()


@dataclass(frozen=True)
class Vote:
    verdict: str  # success | failure | "" (no verdict)
    reason: str
    raw: str = ""

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, "raw": self.raw[:2000]}


@dataclass(frozen=True)
class Judgement:
    verdict: str
    reason: str
    confidence: float | None
    votes: list[Vote] = field(default_factory=list)
    model: str = ""


def judge_messages(episode: EpisodeForJudge, *, thought_chars: int = 300) -> list[dict]:
    """The chat a VLM judge is sent: the system prompt above, then one user turn with the episode as text and
    each screenshot as an image part (``data:`` URL) after a caption naming its step."""
    lines = [f"Instruction: {episode.instruction or '(none recorded)'}", "", "Actions, in order:"]
    if not episode.actions:
        lines.append("(the agent took no action)")
    for index, action in enumerate(episode.actions):
        thought = episode.thoughts[index] if index < len(episode.thoughts) else ""
        thought = " ".join(thought.split())[:thought_chars]
        lines.append(f"{index + 1}. {action}" + (f"  (thought: {thought})" if thought else ""))
    lines += ["", f"Final answer: {episode.final_answer or '(none: the agent did not call finished)'}"]
    content: list[dict] = [{"type": "text", "text": "\n".join(lines)}]
    if episode.screenshots:
        content.append({"type": "text", "text": f"The last {len(episode.screenshots)} screenshot(s), oldest first:"})
    for index, image in episode.screenshots:
        content.append({"type": "text", "text": f"Screen before step {index + 1}:"})
        content.append({"type": "image_url", "image_url": {"url": image_url(image)}})
    content.append({"type": "text", "text": "Did the agent complete the task? Answer in the two lines asked for."})
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": content}]


def parse_verdict(text: str) -> Vote:
    """Read one answer strictly: a ``Verdict:`` line (success or failure) first, then a non-empty ``Reason:``
    (which may run over further lines). Anything else is no verdict, saying what was wrong."""
    shown = " ".join(text.split())[:160]
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return Vote(NO_VERDICT, "the judge answered nothing", text)
    match = _VERDICT.match(lines[0])
    if not match:
        return Vote(NO_VERDICT, f"the judge's answer does not start with 'Verdict: success' or 'Verdict: failure': "
                                f"{shown!r}", text)
    reason = _REASON.match("\n".join(lines[1:]))
    if not reason:
        return Vote(NO_VERDICT, f"the judge gave no 'Reason:' line after its verdict: {shown!r}", text)
    return Vote(match.group(1).lower(), " ".join(reason.group(1).split()), text)


def tally(votes: Sequence[Vote], *, model: str = "") -> Judgement:
    """The majority of ``votes`` and its share of all of them as the confidence (2 of 3 -> 0.67). No verdict when
    no sample could be read (the first one's reason says why) or the readable ones tie."""
    if not votes:
        return Judgement(NO_VERDICT, "the judge was not asked (no samples)", None, [], model)
    counts = Counter(v.verdict for v in votes if v.verdict != NO_VERDICT)
    if not counts:
        return Judgement(NO_VERDICT, votes[0].reason, None, list(votes), model)
    ranked = counts.most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return Judgement(NO_VERDICT, f"the samples tie: {ranked[0][1]} success, {ranked[1][1]} failure",
                         None, list(votes), model)
    verdict, n = ranked[0]
    reason = next(v.reason for v in votes if v.verdict == verdict)
    return Judgement(verdict, reason, round(n / len(votes), 2), list(votes), model)


def judge_votes(policy: Policy, episode: EpisodeForJudge, *, samples: int = 1,
                temperature: float | None = None) -> Judgement:
    """Ask ``policy`` ``samples`` times about ``episode`` and vote. A backend error (timeout, HTTP error) is that
    sample's no-verdict reason; nothing is raised."""
    if samples < 1:
        raise ValueError(f"samples must be at least 1, not {samples}")
    messages = judge_messages(episode)
    votes, model = [], ""
    for _ in range(samples):
        output: PolicyOutput = policy.act(messages, temperature=temperature)
        model = model or output.model
        if output.error:
            votes.append(Vote(NO_VERDICT, f"the judge failed: {output.error}", output.text))
        else:
            votes.append(parse_verdict(output.text))
    return tally(votes, model=model)


class ScriptedJudgePolicy(Policy):
    """A judge whose answers are given: sample i answers ``answers[i % len(answers)]``. For tests and demos of
    voting without a model; its answers go through the same parsing and voting as a real judge's."""

    name = "scripted"

    def __init__(self, answers: Sequence[str]) -> None:
        if not answers:
            raise ValueError("a scripted judge needs at least one answer")
        self.answers = list(answers)
        self.calls = 0

    def act(self, messages: list[dict], *, temperature: float | None = None) -> PolicyOutput:
        text = self.answers[self.calls % len(self.answers)]
        self.calls += 1
        return PolicyOutput(text=text, model="scripted-judge")
