"""Project settings by section: one entry a section of ``Project.settings`` (the routing, the judge, the polisher,
the cycle), each with its key, its defaults and how a change is cleaned; one reader and one setter for all of them
(and one API view, projects/api_settings.py). Adding a section is a :class:`Section` beside its topic and a view
class naming it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction

from core.audit import audit_record
from projects.models import Project


def _same(stored: dict, project: Project) -> dict:
    return stored


def _changes(changes: dict, stored: dict) -> dict:
    return changes


@dataclass(frozen=True)
class Section:
    """One section of ``Project.settings``.

    ``clean(project, current, changes)`` returns the section as it will be stored (``current``: what
    :func:`section_of` reads now) or raises ApplicationError naming the bad field; ``read(stored, project)`` fills
    in what the stored dict leaves to the server (a default backend, a float); ``audit(changes, stored)`` is what the
    audit entry records."""
    key: str
    defaults: dict
    clean: Callable[[Project, dict, dict], dict]
    audit_action: str
    read: Callable[[dict, Project], dict] = field(default=_same)
    audit: Callable[[dict, dict], dict] = field(default=_changes)


def section_of(section: Section, project: Project) -> dict:
    """The project's settings of ``section``, its defaults filled in."""
    return section.read({**section.defaults, **(project.settings or {}).get(section.key, {})}, project)


@transaction.atomic
def section_set(*, section: Section, project: Project, actor, changes: dict, audit_extra: dict | None = None) -> dict:
    """Change the project's ``section``: cleaned against what it holds now, under the project's row lock (two
    managers' changes apply one after the other), audited (with ``audit_extra``); returns the section as stored.
    ``project`` sees it too."""
    locked = Project.objects.select_for_update().get(pk=project.pk)
    stored = section.clean(locked, section_of(section, locked), changes)
    locked.settings = {**(locked.settings or {}), section.key: stored}
    locked.save(update_fields=["settings"])
    project.settings = locked.settings
    audit_record(actor=actor, action=section.audit_action, target=project, data={**section.audit(changes, stored), **(audit_extra or {})})
    return stored
