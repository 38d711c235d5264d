"""The longest text a person may type into each field, in characters.

What people type is kept whole up to its field's limit and refused past it, with a message naming the field and
the limit: never cut. The page counts characters as a field nears its limit (frontend/src/components/limits.ts
holds the same numbers; tests/core/test_limits.py keeps the two equal).
"""
from __future__ import annotations

from core.errors import ApplicationError

LIMITS: dict[str, int] = {
    "project_name": 200,
    "snapshot_name": 200,
    "queue_name": 200,
    "token_name": 100,
    "task_id": 100,
    "task_instruction": 4000,
    "review_comment": 10000,
    "adjudication_comment": 10000,
    "reject_reason": 4000,
    "human_thought": 10000,
    "finish_comment": 10000,
    "typed_text": 10000,
    "call_user_answer": 4000,
}

LABELS: dict[str, str] = {
    "project_name": "The project name",
    "snapshot_name": "The snapshot name",
    "queue_name": "The queue name",
    "token_name": "The token name",
    "task_id": "The task id",
    "task_instruction": "The instruction",
    "review_comment": "The comment",
    "adjudication_comment": "The comment",
    "reject_reason": "The reason",
    "human_thought": "The thought",
    "finish_comment": "The comment",
    "typed_text": "The text to type",
    "call_user_answer": "The answer",
}


def too_long(kind: str, value: str) -> str:
    """The message for ``value`` over the limit of ``kind``, or "" when it fits."""
    limit = LIMITS[kind]
    if len(value) <= limit:
        return ""
    return (f"{LABELS[kind]} is {len(value):,} characters long; the limit is {limit:,}. "
            "Shorten it and send it again: nothing was saved.")


def check_length(kind: str, value: str, *, field: str | None = None) -> str:
    """Return ``value`` when it fits the limit of ``kind``; otherwise raise ApplicationError naming the field."""
    message = too_long(kind, value or "")
    if message:
        raise ApplicationError(message, errors={field or kind: [message]})
    return value
