"""A project's file store: the files its OSWorld tasks download (``download`` steps, ``cloud_file`` checks), which
a manager uploads since the rollout workers reach no internet (ProjectFile, keyed by URL and target path).

A task whose files are not all there imports, and is listed on the Tasks page with the files it lacks; starting it is
refused naming them (``start_refusal``), so it never fails half-way for want of one. The rollout worker hands the
env local copies of the task's files (``files_for_task``)."""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile, File
from django.core.files.storage import default_storage
from django.db import transaction

from agent.envs.desktop.osworld import TaskFormatError, load_task
from core.audit import audit_record
from core.errors import ApplicationError
from projects.models import Project, ProjectFile, TaskSpec

MAX_FILE_BYTES = int(os.environ.get("LOUPE_TASK_FILE_MAX_MB", "512")) * 2**20
MAX_URL = 4000


def task_needs(task: TaskSpec) -> list:
    """The files an authored desktop task downloads (osworld.TaskFile), [] for any other task."""
    if task.env_kind != "desktop" or task.definition is None:
        return []
    try:
        return list(load_task(task.definition, origin=task.task_name).files)
    except (TaskFormatError, TypeError, AttributeError, KeyError, IndexError):
        return []  # stored before a loader change refused it; the env says why at start


def _entries(project_id: int) -> dict[tuple[str, str], ProjectFile]:
    return {(f.url, f.path): f for f in ProjectFile.objects.filter(project_id=project_id)}


def _find(entries: dict, url: str, path: str) -> ProjectFile | None:
    return entries.get((url, path)) or entries.get((url, ""))


def missing_task_files(task: TaskSpec) -> list:
    entries = _entries(task.project_id)
    return [item for item in task_needs(task) if _find(entries, item.url, item.path) is None]


def start_refusal(task: TaskSpec) -> str:
    """Why ``task`` cannot start for want of files, naming them, or ""."""
    missing = missing_task_files(task)
    if not missing:
        return ""
    names = ", ".join(dict.fromkeys(item.name for item in missing))
    return (f"'{task.task_name}' needs {len(missing)} file{'s' if len(missing) > 1 else ''} that the project's file "
            f"store does not hold: {names}. Upload {'them' if len(missing) > 1 else 'it'} on the Tasks page "
            "(Task files), then start it again.")


def local_copy(entry: ProjectFile) -> str:
    """A path on this machine holding the entry's bytes: the storage's own file where it is on disk, else a copy in
    the data folder's cache (an S3-compatible store), made once a content hash."""
    try:
        return default_storage.path(entry.stored)
    except NotImplementedError:
        cache = Path(settings.DATA_DIR) / "cache" / "task-files"
        target = cache / entry.sha256
        if not target.exists():
            cache.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".part")
            with default_storage.open(entry.stored, "rb") as source, open(partial, "wb") as out:
                shutil.copyfileobj(source, out)
            partial.replace(target)
        return str(target)


def files_for_task(task: TaskSpec) -> dict:
    """``{(url, path): local file}`` for the task's files that the store holds (the env's ``files``)."""
    entries = _entries(task.project_id)
    found = {}
    for item in task_needs(task):
        entry = _find(entries, item.url, item.path)
        if entry is not None:
            found[(item.url, item.path)] = local_copy(entry)
    return found


def files_for_env(*, project: Project) -> dict:
    """Every file of the store, ``{(url, path): local file}``."""
    return {(f.url, f.path): local_copy(f) for f in ProjectFile.objects.filter(project=project)}


def task_files_listing(*, project: Project) -> list[dict]:
    """Each authored desktop task that downloads files, with each file and the stored one, if any."""
    entries = _entries(project.pk)
    listing = []
    tasks = project.tasks.filter(env_kind="desktop", definition__isnull=False).order_by("task_name", "split", "pk")
    for task in tasks:
        needs = task_needs(task)
        if not needs:
            continue
        files = []
        for item in needs:
            entry = _find(entries, item.url, item.path)
            files.append({"url": item.url, "path": item.path, "name": item.name, "where": item.where,
                          "stored": None if entry is None else _stored(entry)})
        listing.append({"task": task.pk, "task_name": task.task_name, "split": task.split, "files": files,
                        "missing": sum(1 for f in files if f["stored"] is None)})
    return listing


def _stored(entry: ProjectFile) -> dict:
    return {"id": entry.pk, "name": entry.name, "size": entry.size, "sha256": entry.sha256, "path": entry.path,
            "created_at": entry.created_at.isoformat() if entry.created_at else None}


@transaction.atomic
def project_file_upload(*, project: Project, actor, url: str, path: str = "", upload: File) -> ProjectFile:
    """Store ``upload`` as the file at ``url`` (for the target ``path``, or any when empty), replacing the one stored
    for them. ApplicationError naming the field when the URL or the file is missing or too large."""
    url, path = (url or "").strip(), (path or "").strip()
    errors = {}
    if not url:
        errors["url"] = ["Give the URL the task downloads this file from (the Tasks page lists them)."]
    elif len(url) > MAX_URL:
        errors["url"] = [f"The URL is {len(url):,} characters long; the limit is {MAX_URL:,}."]
    if len(path) > 1000:
        errors["path"] = ["The target path is longer than 1,000 characters."]
    if upload is None:
        errors["file"] = ["Choose the file to upload."]
    elif upload.size > MAX_FILE_BYTES:
        errors["file"] = [f"{upload.name} is {upload.size / 2**20:,.0f} MB; the limit is {MAX_FILE_BYTES // 2**20} MB "
                          "(LOUPE_TASK_FILE_MAX_MB)."]
    if errors:
        raise ApplicationError(" ".join(message for messages in errors.values() for message in messages),
                               errors=errors)
    digest = hashlib.sha256()
    for chunk in upload.chunks():
        digest.update(chunk)
    sha256 = digest.hexdigest()
    stored = f"task-files/{sha256[:2]}/{sha256}"
    if not default_storage.exists(stored):
        upload.seek(0)
        default_storage.save(stored, upload if hasattr(upload, "chunks") else ContentFile(upload.read()))
    entry, _ = ProjectFile.objects.update_or_create(
        project=project, url=url, path=path,
        defaults={"name": Path(upload.name).name[:255] or "file", "stored": stored, "sha256": sha256,
                  "size": upload.size, "uploaded_by": actor if getattr(actor, "is_authenticated", False) else None})
    audit_record(actor=actor, action="task_file.upload", target=f"project:{project.pk}", project_id=project.pk,
                 data={"url": url[:500], "path": path, "sha256": sha256, "size": upload.size})
    return entry


@transaction.atomic
def project_file_delete(*, project: Project, actor, file_id: int) -> None:
    entry = ProjectFile.objects.filter(project=project, pk=file_id).first()
    if entry is None:
        raise ApplicationError("No such file in this project's file store.", status=404)
    audit_record(actor=actor, action="task_file.delete", target=f"project:{project.pk}", project_id=project.pk,
                 data={"url": entry.url[:500], "path": entry.path, "sha256": entry.sha256})
    entry.delete()  # the bytes stay: another project's entry, or this one's again, may name the same content
