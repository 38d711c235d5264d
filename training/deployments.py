"""Checkpoints and which one a project serves: registering, promoting and rolling back, one transaction each."""
from __future__ import annotations

import json
from pathlib import Path

from django.db import transaction
from django.utils import timezone
from safetensors import safe_open

from agent.formats import FORMATS, canonical
from core.audit import audit_record
from core.errors import ApplicationError
from projects.models import Project
from rollouts.models import Checkpoint, Deployment
from training import policy_server


def checkpoint_check_files(uri: str) -> None:
    """Refuse a checkpoint whose files are missing or unreadable, before anything serves it."""
    path = Path(uri)
    try:
        found = path.is_dir()
    except (OSError, ValueError) as exc:  # a name too long for the file system, say
        raise ApplicationError(f"The checkpoint directory {uri[:200]} cannot be read: {exc.__class__.__name__}.",
                               status=409) from None
    if not found:
        raise ApplicationError(f"The checkpoint directory {uri} does not exist.", status=409)
    if not (path / "config.json").exists():
        raise ApplicationError(f"{uri} has no config.json; it is not an HF-format checkpoint.", status=409)
    weights = list(path.glob("*.safetensors")) + list(path.glob("*.bin"))
    if not weights or any(w.stat().st_size == 0 for w in weights):
        raise ApplicationError(f"{uri} has no readable weights (model.safetensors).", status=409)
    try:
        for w in path.glob("*.safetensors"):
            with safe_open(str(w), framework="pt") as handle:
                list(handle.keys())
    except Exception as exc:
        raise ApplicationError(f"The weights in {uri} are corrupt: {exc}", status=409)


def _json_file(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def checkpoint_reads_images_possible(uri: str) -> bool:
    """Whether the checkpoint dir holds a vision-language model (its config.json has a ``vision_config``)."""
    return "vision_config" in _json_file(Path(uri) / "config.json")


def _format_check(action_format) -> str:
    """The format a checkpoint is recorded in: a known one, an old name taken as the format it names now."""
    if action_format not in FORMATS:
        raise ApplicationError(f"Unknown action format {action_format!r}; use one of {', '.join(FORMATS)}.",
                               errors={"action_format": [f"Use one of {', '.join(FORMATS)}."]})
    return canonical(action_format)


@transaction.atomic
def checkpoint_register(*, project, name: str, uri: str, base_model: str = "tiny", parent=None, produced_by=None,
                        metrics: dict | None = None, action_format: str | None = None,
                        reads_images: bool | None = None, actor=None) -> Checkpoint:
    """Record a checkpoint dir (idempotent on the name). ``action_format`` (agent/formats) and ``reads_images``
    not given are inherited: from ``parent`` (a training run's checkpoint speaks as its init did), else from the
    dir's loupe.json (the trainer writes them there), else format loupe, reading screenshots when the dir holds a
    vision-language model. A checkpoint that reads screenshots must be one (config.json with ``vision_config``).
    ``actor``: the person registering it (audited); training registers its checkpoints without one."""
    checkpoint_check_files(uri)
    recorded = _json_file(Path(uri) / "loupe.json")
    if action_format is None:
        action_format = parent.action_format if parent is not None else recorded.get("action_format", "loupe")
    if reads_images is None:
        reads_images = (parent.reads_images if parent is not None else
                        recorded.get("reads_images", checkpoint_reads_images_possible(uri)))
    action_format = _format_check(action_format)
    if not isinstance(reads_images, bool):
        raise ApplicationError("reads_images must be true or false.", errors={"reads_images": ["Use true or false."]})
    if reads_images and not checkpoint_reads_images_possible(uri):
        raise ApplicationError(f"{uri} holds no vision-language model (its config.json has no vision_config), so it "
                               "cannot read screenshots; register it with reads_images false.",
                               errors={"reads_images": ["This checkpoint has no vision part."]})
    checkpoint, _ = Checkpoint.objects.get_or_create(
        project=project, name=name,
        defaults={"uri": uri, "base_model": base_model, "parent": parent, "produced_by": produced_by,
                  "metrics": metrics or {}, "action_format": action_format, "reads_images": reads_images},
    )
    if actor is not None:
        audit_record(actor=actor, action="checkpoint.register", target=f"checkpoint:{checkpoint.pk}",
                     project_id=project.pk, data={"uri": uri, "action_format": action_format,
                                                  "reads_images": reads_images})
    return checkpoint


@transaction.atomic
def deployment_promote(*, project, checkpoint: Checkpoint, actor=None, backend: str = "local", served_name: str = "",
                       reason: str = "") -> Deployment:
    """Make `checkpoint` the one active deployment of `project`, in one transaction (so is rollback)."""
    if checkpoint.project_id != project.pk:
        raise ApplicationError("That checkpoint belongs to another project.", status=404)
    if backend != "scripted":  # the scripted baseline has no weights
        checkpoint_check_files(checkpoint.uri)
    now = timezone.now()
    Project.objects.select_for_update().get(pk=project.pk)  # serialise promotions of one project
    Deployment.objects.filter(project=project, active=True).update(active=False, deactivated_at=now)
    deployment = Deployment.objects.create(project=project, checkpoint=checkpoint, backend=backend,
                                           served_name=served_name, active=True, activated_at=now,
                                           created_by=actor if getattr(actor, "is_authenticated", False) else None,
                                           reason=reason[:300])
    audit_record(actor=actor, action="deployment.promote", target=f"checkpoint:{checkpoint.pk}", project_id=project.pk,
                 data={"backend": backend, "reason": reason})
    return deployment


def deployment_rollback(*, project, deployment: Deployment, actor) -> Deployment:
    """Make an earlier deployment's checkpoint active again, the same way it was served, in one transaction.
    On the openai backend its model is (re)loaded into the server first; that is idempotent."""
    if deployment.project_id != project.pk:
        raise ApplicationError("No such deployment in this project.", status=404)
    if deployment.active:
        raise ApplicationError(f"Deployment #{deployment.pk} ({deployment.checkpoint.name}) is already the active one.",
                               status=409)
    checkpoint = deployment.checkpoint
    if deployment.backend == "openai":
        checkpoint_check_files(checkpoint.uri)
        adapter = Path(checkpoint.uri) / "adapter"
        policy_server.served_model_load(name=deployment.served_name or policy_server.served_name_for(checkpoint),
                          path=str(adapter if adapter.is_dir() else checkpoint.uri))
    with transaction.atomic():
        restored = deployment_promote(project=project, checkpoint=checkpoint, actor=actor, backend=deployment.backend,
                                      served_name=deployment.served_name,
                                      reason=f"rollback to deployment #{deployment.pk} ({checkpoint.name})")
        audit_record(actor=actor, action="deployment.rollback", target=f"deployment:{deployment.pk}",
                     project_id=project.pk, data={"new_deployment": restored.pk, "checkpoint": checkpoint.pk})
    return restored
