"""How sure a policy was of the action it proposed, from its own answer's token logprobs.

The score is the geometric mean of the action tokens' probabilities: ``exp(mean logprob)`` over the tokens of
the answer's action (from its ``Action:`` line on; the whole answer when it has none), so it lies in (0, 1] and
a floor such as 0.5 reads as "on average, each token of the action had half the probability mass". The thought
before the action is left out: a model may hesitate over wording and still be sure of where to click.

The margin is the mean, over the same tokens, of the chosen token's logprob minus the runner-up's, where the
backend returned its top-k (``PolicyOutput.top_logprobs``); None where it did not.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["Confidence", "action_start", "confidence_of"]

_ACTION = re.compile(r"^[ \t]*action[ \t]*:", re.IGNORECASE | re.MULTILINE)
_TIE = 1e-6  # the chosen token's logprob and the top one's are the same token's when this close


@dataclass(frozen=True)
class Confidence:
    score: float  # exp(mean logprob of the action tokens), in (0, 1]
    mean_logprob: float
    margin: float | None  # mean (chosen - runner-up) logprob over the action tokens; None without top-k
    tokens: int  # how many tokens were the action's

    def to_dict(self) -> dict:
        return {"score": round(self.score, 6), "mean_logprob": round(self.mean_logprob, 6),
                "margin": None if self.margin is None else round(self.margin, 6), "tokens": self.tokens}


def action_start(text: str) -> int:
    """Where the answer's action begins: its last ``Action:`` line (0: the whole answer is the action)."""
    matches = list(_ACTION.finditer(text))
    return matches[-1].start() if matches else 0


def runner_up(chosen: float, top: list[float]) -> float | None:
    """The best logprob among ``top`` (descending, as backends return them) that is not the chosen token's."""
    for i, value in enumerate(top):
        if abs(value - chosen) <= _TIE and i == 0:
            continue  # the chosen token is the top one: the runner-up is next
        return value
    return None


def confidence_of(text: str, token_logprobs: list[float], token_ends: list[int],
                  top_logprobs: list[list[float]] | None = None) -> Confidence | None:
    """The confidence of the action in ``text``. ``token_ends[i]``: where token i ends in ``text`` (characters);
    a token is the action's when it ends past the action's start. None when there are no logprobs, or the token
    ends are missing or do not match the logprobs (then which tokens are the action's is unknown)."""
    if not token_logprobs:
        return None
    start = action_start(text)
    if start == 0:
        picked = list(range(len(token_logprobs)))
    elif len(token_ends) == len(token_logprobs):
        picked = [i for i, end in enumerate(token_ends) if end > start]
    else:
        return None
    picked = [i for i in picked if math.isfinite(token_logprobs[i])] or picked
    if not picked:
        return None
    mean = sum(token_logprobs[i] for i in picked) / len(picked)
    margin = None
    if top_logprobs and len(top_logprobs) == len(token_logprobs):
        gaps = [token_logprobs[i] - r for i in picked
                if (r := runner_up(token_logprobs[i], list(top_logprobs[i] or []))) is not None]
        margin = sum(gaps) / len(gaps) if gaps else None
    return Confidence(score=math.exp(min(0.0, mean)), mean_logprob=mean, margin=margin, tokens=len(picked))
