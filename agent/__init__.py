"""Loupe's Django-free agent core.

- ``agent.actions``: the action grammar (``parse_action``, ``parse_turn``, ``format_turn``).
- ``agent.envs``: ``make_env("miniwob" | "terminal")`` and the ``Env`` / ``Observation`` interface.
- ``agent.solvers``: scripted solvers (``solve_step``), the cold-start demonstrations.
- ``agent.prompt``: the one prompt renderer (``SYSTEM_PROMPT``, ``render_messages``).
- ``agent.policies``: ``make_policy("local" | "openai" | "scripted")``.
- ``agent.rollout``: ``run_episode`` with a supervisor hook.

Nothing here imports Django or any other part of Loupe.
"""
