"""Policy backends behind one interface: ``make_policy("local" | "openai" | "scripted", **kw)``."""

from __future__ import annotations

from typing import Any

from agent.policies.base import Policy, PolicyError, PolicyOutput

__all__ = ["Policy", "PolicyError", "PolicyOutput", "make_policy"]

BACKENDS = ("local", "openai", "scripted", "served")  # served: the host's policy server (agent/policies/served.py)


def make_policy(backend: str, **kw: Any) -> Policy:
    """Build a policy; keyword arguments go to the backend's constructor."""
    if backend == "local":
        from agent.policies.local import LocalPolicy  # torch is imported only when needed

        return LocalPolicy(**kw)
    if backend == "openai":
        from agent.policies.openai_compat import OpenAIPolicy

        return OpenAIPolicy(**kw)
    if backend == "served":
        from agent.policies.served import ServedPolicy

        return ServedPolicy(**kw)
    if backend == "scripted":
        from agent.policies.scripted import ScriptedPolicy

        return ScriptedPolicy(**kw)
    raise PolicyError(f"unknown policy backend {backend!r}; expected one of: {', '.join(BACKENDS)}")
