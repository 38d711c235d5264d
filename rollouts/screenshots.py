"""Screenshots in the project's storage, addressed by their content: the one place a step's, a proposal's and a
prompt's image is written (rollouts/steps.py, rollouts/privacy.py)."""
from __future__ import annotations

import hashlib

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage


def screenshot_store(data: bytes) -> str:
    """Store a screenshot by its content hash; the same image is stored once."""
    digest = hashlib.sha256(data).hexdigest()
    name = f"screenshots/{digest[:2]}/{digest}.jpg"
    if not default_storage.exists(name):
        default_storage.save(name, ContentFile(data))
    return name
