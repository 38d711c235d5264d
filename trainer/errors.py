"""The trainer's one error: a problem with its input that a person can fix. The CLI prints it and exits 2.

Apart from trainer/model.py (which re-exports it) so that a module under the model, such as the tokenizer, raises it
without importing torch's side of the trainer."""

from __future__ import annotations

__all__ = ["TrainerError"]


class TrainerError(Exception):
    """A problem with the trainer's input that a person can fix; the CLI prints it and exits 2."""
