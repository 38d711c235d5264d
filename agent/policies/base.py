"""One interface for every policy backend: messages in, a turn's text (with logprobs) out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from agent.confidence import Confidence, confidence_of

__all__ = ["Policy", "PolicyError", "PolicyOutput"]


@dataclass
class PolicyOutput:
    """What a policy produced for one turn.

    ``token_ids`` / ``token_logprobs`` are the generated tokens and their log-probabilities under
    the model's own distribution (temperature 1), which RL needs as the "old" logprobs. A failure
    is reported in ``error`` with ``text == ""``, never raised from ``act``. ``token_ends[i]`` is where token i
    ends in ``text`` (characters) and ``top_logprobs[i]`` the k best logprobs at its place, best first, where the
    backend gave them: what :meth:`confidence` needs to score the action alone.
    """

    text: str
    token_ids: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    model: str = ""
    latency_ms: float = 0.0
    error: str | None = None
    token_ends: list[int] = field(default_factory=list)
    top_logprobs: list[list[float]] = field(default_factory=list)

    def confidence(self) -> Confidence | None:
        """How sure the policy was of this answer's action (agent.confidence); None without logprobs."""
        if self.error is not None:
            return None
        return confidence_of(self.text, self.token_logprobs, self.token_ends, self.top_logprobs)

    def to_dict(self) -> dict:
        return {
            "text": self.text, "token_ids": list(self.token_ids), "token_logprobs": list(self.token_logprobs),
            "model": self.model, "latency_ms": self.latency_ms, "error": self.error,
        }


class PolicyError(RuntimeError):
    """A policy could not be built (missing checkpoint, bad configuration)."""


class Policy(ABC):
    name: str = ""

    @abstractmethod
    def act(self, messages: list[dict], *, temperature: float | None = None) -> PolicyOutput:
        """Produce the next turn. Errors come back as ``PolicyOutput(error=...)``; never hangs.

        ``temperature`` overrides the policy's own for this turn (the rollout loop samples when a
        proposal repeats one a person rejected); None keeps the policy's setting."""
