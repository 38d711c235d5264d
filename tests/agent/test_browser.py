"""agent/envs/browser.py: what the browser envs share, without a browser."""

from __future__ import annotations

import pytest

from agent.envs.browser import playwright_key


def test_playwright_key_names():
    assert playwright_key("ctrl+a") == "Control+a"
    assert playwright_key("Enter") == "Enter" and playwright_key("shift+tab") == "Shift+Tab"
    assert playwright_key("f5") == "F5"
    with pytest.raises(ValueError):
        playwright_key("hyper+q")
