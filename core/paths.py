"""Server file paths are for admins: what others read of checkpoints, runs and cycles names files without them.

A checkpoint's directory, a run's output folder or a trainer's traceback name places on the servers (the data
folder, the checkpoints folder, the code's folder, temporary folders). ``paths_hidden`` rewrites every such path
in a JSON-like value to ``…/<its last part>``: enough to tell two apart, nothing of where they live."""
from __future__ import annotations

import re
import tempfile
from functools import lru_cache
from pathlib import Path

from django.conf import settings

HIDDEN = "…/"


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern:
    roots = {str(Path(p).resolve()) for p in (settings.BASE_DIR, settings.DATA_DIR, settings.MEDIA_ROOT,
                                               settings.LOUPE_CHECKPOINT_DIR, tempfile.gettempdir())}
    roots |= {str(Path(p)) for p in (settings.BASE_DIR, settings.DATA_DIR, settings.LOUPE_CHECKPOINT_DIR)}
    roots |= {"/root", "/home", "/tmp", "/var", "/srv", "/opt", "/data", "/mnt"}
    alternatives = "|".join(re.escape(root.rstrip("/")) for root in sorted(roots, key=len, reverse=True) if root != "/")
    # a root, then any path characters; the last part is what stays
    return re.compile(rf"(?<![\w./-])(?:{alternatives})(?![\w.-])(?:/[^\s'\"(),:;<>\[\]{{}}]*)?")


def _last_part(match: re.Match) -> str:
    parts = [part for part in match.group(0).split("/") if part]
    return HIDDEN + (parts[-1] if parts else "")


def paths_hidden(value):
    """``value`` (str, dict, list, or anything else left as it is) with every server path as ``…/<last part>``."""
    if isinstance(value, str):
        return _pattern().sub(_last_part, value)
    if isinstance(value, dict):
        return {key: paths_hidden(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [paths_hidden(item) for item in value]
    return value
