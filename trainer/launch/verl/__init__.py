"""verl hand-off: a verl agent loop that plays Loupe tasks through the environment service (agent_loop.py, on
episode.py), the loop's registration (agent_loop.yaml) and a launch config (loupe_grpo.yaml). verl pins other
versions than Loupe's venv: it runs in an environment of its own (README, "verl")."""
