"""How many earlier screenshots a screen-reading checkpoint gets beside the current one: the project's cycle setting
``history_images`` (cleaned by cycles/cycle_settings.py), read here for the rollout worker and the snapshot rows,
which stand under cycles and do not import it."""
from __future__ import annotations

from projects.models import Project

CYCLE_SECTION = "cycle"  # cycles.cycle_settings.CYCLE_SETTINGS.key
DEFAULT_HISTORY_IMAGES = 0


def history_images_of(project: Project) -> int:
    return (project.settings or {}).get(CYCLE_SECTION, {}).get("history_images", DEFAULT_HISTORY_IMAGES)
