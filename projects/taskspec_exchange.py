"""A project's tasks in and out as files in an authored format (OSWorld JSON, Loupe's own): every item checked by
projects/taskspec_authoring.py, imported all or nothing through projects/services.py."""
from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from core.audit import audit_record
from core.errors import ApplicationError
from projects.models import Project, Split, TaskSpec
from projects.services import task_create
from projects.taskspec_authoring import MAX_IMPORT, Definition, definition_check, format_kind


# -- import and export -----------------------------------------------------------------------------
def _items(files: list[tuple[str, Any]]) -> tuple[list[tuple[str, Any]], list[str]]:
    """Flatten (name, content) pairs into (origin, task object) pairs. ``content`` is a file's bytes (parsed here) or
    JSON already parsed; a file may hold one task or a list. Returns the items and the files' errors."""
    items, errors = [], []
    for name, content in files:
        if isinstance(content, bytes):
            try:
                content = json.loads(content)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                errors.append(f"{name}: not a readable JSON file ({exc}).")
                continue
        tasks = content if isinstance(content, list) else [content]
        if not tasks:
            errors.append(f"{name}: holds an empty list, no task.")
        items += [(f"{name}[{index}]" if isinstance(content, list) else name, task) for index, task in enumerate(tasks)]
    return items, errors


@transaction.atomic
def task_import(*, project: Project, actor, format: str, files: list[tuple[str, Any]], split: str = Split.TRAIN,
                seed_start: int = 0, seed_end: int = 999) -> list[TaskSpec]:
    """Add every task of ``files`` (``(file name, content)``: see _items) to the project, or none: one transaction,
    and every refusal reported (ApplicationError, its ``errors["tasks"]`` a message an item, each naming the file,
    the task's id and what is wrong or unsupported)."""
    authored = format_kind(format)
    if split not in Split.values:
        raise ApplicationError(f"Unknown split '{split}'; use {' or '.join(Split.values)}.",
                               errors={"split": ["Invalid choice."]})
    items, errors = _items(files)
    if not items and not errors:
        raise ApplicationError("There is nothing to import: give at least one task file.",
                               errors={"tasks": ["No task given."]})
    if len(items) > MAX_IMPORT:
        raise ApplicationError(f"At most {MAX_IMPORT} tasks an import; split the files.",
                               errors={"tasks": ["Too many."]})
    checked: list[tuple[Definition, dict | None]] = []
    seen: dict[str, str] = {}
    existing = set(project.tasks.filter(env_kind=authored.kind, split=split).values_list("task_name", flat=True))
    for origin, data in items:
        try:
            loaded, stored = definition_check(env_kind=authored.kind, definition=data, origin=origin)
        except ApplicationError as exc:
            errors += exc.errors.get("definition") or [exc.message]
            continue
        if loaded.task_id in seen:
            errors.append(f"{origin}: the task id '{loaded.task_id}' is also in {seen[loaded.task_id]}; "
                          "ids must differ.")
        elif loaded.task_id in existing:
            errors.append(f"{origin}: '{loaded.task_id}' ({split}) is already a task of this project; edit it on the "
                          "Tasks page or remove it first.")
        seen.setdefault(loaded.task_id, origin)
        checked.append((loaded, stored))
    if errors:
        raise ApplicationError(f"Nothing was imported: {len(errors)} problem{'s' if len(errors) > 1 else ''} "
                               f"found. {errors[0]}", errors={"tasks": errors})
    created = [
        task_create(project=project, actor=actor, env_kind=authored.kind, task_name=loaded.task_id,
                    definition=stored, split=split, seed_start=seed_start, seed_end=seed_end,
                    max_steps=loaded.max_steps)
        for loaded, stored in checked
    ]
    audit_record(actor=actor, action="task.import", target=f"project:{project.pk}", project_id=project.pk,
                 data={"format": format, "tasks": [task.pk for task in created]})
    return created


def task_export(*, project: Project, format: str) -> list[dict]:
    """The project's tasks of the format's env kind as that format's JSON (a list): an authored task's definition,
    a shipped task's shipped JSON. A task in both splits is listed once."""
    authored = format_kind(format)
    shipped = authored.shipped()
    out, seen = [], set()
    for task in project.tasks.filter(env_kind=authored.kind).order_by("task_name", "split", "pk"):
        if task.task_name in seen:
            continue
        data = task.definition if task.definition is not None else shipped.get(task.task_name)
        if data is not None:
            seen.add(task.task_name)
            out.append(data)
    return out
