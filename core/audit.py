"""The audit log's one writer."""
from __future__ import annotations

from django.db import models

from core.models import AuditEntry


def audit_target(target) -> tuple[str, int | None]:
    """A target as the log stores it: 'episode:12' for a record (and its project), a string as given."""
    if isinstance(target, models.Model):
        label = {"datasetsnapshot": "snapshot", "trainingrun": "run"}.get(target._meta.model_name,
                                                                          target._meta.model_name)
        project_id = target.pk if label == "project" else getattr(target, "project_id", None)
        return f"{label}:{target.pk}", project_id
    return str(target), None


def audit_record(*, actor, action: str, target="", project_id: int | None = None, data: dict | None = None) -> None:
    """Append one audit entry inside the caller's transaction (so it commits or rolls back with the change).
    `target` is a record (stored as 'kind:id', its project inferred) or a 'kind:id' string."""
    target, inferred = audit_target(target)
    AuditEntry.objects.create(
        actor=actor if getattr(actor, "is_authenticated", False) else None,
        action=action, target=target[:128], project_id=project_id if project_id is not None else inferred,
        data=data or {},
    )
