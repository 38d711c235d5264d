"""The text limits: one set of numbers on the server and in the page, and text refused past them, never cut."""
import json
import re
from pathlib import Path

import pytest

from core import limits
from core.errors import ApplicationError

LIMITS_TS = Path(__file__).resolve().parents[2] / "frontend" / "src" / "components" / "limits.ts"


def test_the_page_and_the_server_have_the_same_limits():
    body = re.search(r"export const LIMITS = \{(.*?)\} as const;", LIMITS_TS.read_text(), re.S).group(1)
    page = {key: int(value) for key, value in re.findall(r"(\w+): (\d+),", body)}
    assert page == limits.LIMITS


def test_text_at_the_limit_is_kept_whole_and_one_more_character_is_refused_with_the_field_named():
    limit = limits.LIMITS["snapshot_name"]
    assert limits.check_length("snapshot_name", "x" * limit) == "x" * limit
    with pytest.raises(ApplicationError) as refused:
        limits.check_length("snapshot_name", "x" * (limit + 1), field="name")
    assert refused.value.errors == {"name": [refused.value.message]}
    assert f"{limit + 1:,} characters" in refused.value.message and "nothing was saved" in refused.value.message
    json.dumps(refused.value.errors)
