"""Policy backends behind one interface: ``make_policy("local" | "openai" | "scripted", **kw)``."""

from __future__ import annotations

from typing import Any

from agent.policies.base import Policy, PolicyError, PolicyOutput
from agent.policies.local import LocalPolicy
from agent.policies.openai_compat import OpenAIPolicy
from agent.policies.scripted import ScriptedPolicy
from agent.policies.served import ServedPolicy

__all__ = ["Policy", "PolicyError", "PolicyOutput", "make_policy"]

# the one table of policy backends (served: the host's policy server, agent/policies/served.py). Each module is
# light: LocalPolicy imports torch when it loads a checkpoint, not before.
BACKENDS: dict[str, type[Policy]] = {
    "local": LocalPolicy,
    "openai": OpenAIPolicy,
    "scripted": ScriptedPolicy,
    "served": ServedPolicy,
}


def make_policy(backend: str, **kw: Any) -> Policy:
    """Build a policy; keyword arguments go to the backend's constructor."""
    if backend not in BACKENDS:
        raise PolicyError(f"unknown policy backend {backend!r}; expected one of: {', '.join(BACKENDS)}")
    return BACKENDS[backend](**kw)
