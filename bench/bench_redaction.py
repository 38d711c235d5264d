"""Redaction where a step is first stored (rollouts/privacy.py, issue 40): milliseconds ``record_redact`` adds to
storing a step, for a screen of 20 and of 200 elements with nothing to hide (each element's text, the prompt's
element lines and the step's texts through the detectors) and for 20 elements of which one holds an email address
(its box filled: the JPEG decoded and written again).

Usage: ``.venv/bin/python bench/bench_redaction.py`` (or ``python -m bench redaction``). Prints JSON.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
REPEAT = 20


def _step(texts: list[str]) -> tuple[dict, list]:
    from tests.core.pii_set import screen_with

    element = screen_with(["x"])[1][0]
    fields = dict(url="https://example.com/a?b=c", instruction="Open the settings", screen_text="", feedback="",
                  elements=[dict(element, text=text) for text in texts], raw_output="Thought: open it\nAction: "
                  "click(x=1, y=2)", token_ids=[1], token_logprobs=[-0.1], thought="open it",
                  action={"name": "click", "args": {"x": 1, "y": 2}}, action_text="click(x=1, y=2)", proposal=None,
                  info={})
    prompt = [{"role": "user", "content": [{"type": "text", "text": "\n".join(f'[link] "{t}" at (1, 2)'
                                                                               for t in texts)}]}]
    return fields, prompt


def main() -> int:
    from bench.django_setup import setup_django

    setup_django(channel_prefix="bench-redaction")  # the project's settings; migrated as every bench's database is
    from rollouts import privacy
    from tests.core.pii_set import VALUES, screen_with

    screenshot = screen_with(["Settings"] * 5)[0]
    menu = [f"Menu item {i}: settings and preferences of account {i}" for i in range(200)]
    cases = {"20_elements_ms": menu[:20], "200_elements_ms": menu,
             "20_elements_one_box_filled_ms": menu[:19] + [VALUES["email"][1]]}
    out = {}
    for name, texts in cases.items():
        fields, prompt = _step(texts)
        privacy.record_redact(settings={}, fields=fields, screenshot=screenshot, prompt=prompt)  # warm
        began = time.perf_counter()
        for _ in range(REPEAT):
            privacy.record_redact(settings={}, fields=fields, screenshot=screenshot, prompt=prompt)
        out[name] = round((time.perf_counter() - began) / REPEAT * 1000, 1)
    out["load_average_1m"] = round(os.getloadavg()[0], 2)
    out["cpus"] = os.cpu_count()
    print(json.dumps({"redaction_at_store": out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
