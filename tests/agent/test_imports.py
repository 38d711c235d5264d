"""agent/ is the Django-free core: importing all of it pulls in nothing of Django or of Loupe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "agent", "agent.actions", "agent.envs", "agent.envs.base", "agent.envs.miniwob", "agent.envs.terminal",
    "agent.solvers", "agent.prompt", "agent.policies", "agent.policies.base", "agent.policies.local",
    "agent.policies.openai_compat", "agent.policies.scripted", "agent.rollout",
]


def test_agent_imports_nothing_of_django_or_other_loupe_packages():
    code = (
        "import importlib, json, sys\n"
        f"for name in {MODULES!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert not loaded & {"django", "flywheel", "annotation", "webapp", "trainer", "celery", "channels"}
    assert not loaded & {"torch", "transformers", "playwright"}  # heavy backends load only when used
