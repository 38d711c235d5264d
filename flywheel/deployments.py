"""Checkpoints and which one a project serves: registering, promoting and rolling back, one transaction each."""
from __future__ import annotations

from pathlib import Path

from django.db import transaction
from django.utils import timezone
from safetensors import safe_open

from core.audit import audit_record
from core.errors import ApplicationError
from flywheel import policy_server
from flywheel.models import Checkpoint, Deployment, Project

def checkpoint_check_files(uri: str) -> None:
    """Refuse a checkpoint whose files are missing or unreadable, before anything serves it."""
    path = Path(uri)
    if not path.is_dir():
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


@transaction.atomic
def checkpoint_register(*, project, name: str, uri: str, base_model: str = "tiny", parent=None, produced_by=None,
                        metrics: dict | None = None) -> Checkpoint:
    checkpoint_check_files(uri)
    checkpoint, _ = Checkpoint.objects.get_or_create(
        project=project, name=name,
        defaults={"uri": uri, "base_model": base_model, "parent": parent, "produced_by": produced_by,
                  "metrics": metrics or {}},
    )
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
