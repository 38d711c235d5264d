"""One interface for every policy backend: messages in, a turn's text (with logprobs) out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

__all__ = ["Policy", "PolicyError", "PolicyOutput"]


@dataclass
class PolicyOutput:
    """What a policy produced for one turn.

    ``token_ids`` / ``token_logprobs`` are the generated tokens and their log-probabilities under
    the model's own distribution (temperature 1), which RL needs as the "old" logprobs. A failure
    is reported in ``error`` with ``text == ""``, never raised from ``act``.
    """

    text: str
    token_ids: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    model: str = ""
    latency_ms: float = 0.0
    error: str | None = None

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
