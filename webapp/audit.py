from __future__ import annotations

from webapp.models import AuditEntry


def audit_record(*, actor, action: str, target: str = "", project_id: int | None = None, data: dict | None = None) -> None:
    """Append one audit entry inside the caller's transaction (so it commits or rolls back with the change)."""
    AuditEntry.objects.create(
        actor=actor if getattr(actor, "is_authenticated", False) else None,
        action=action, target=target, project_id=project_id, data=data or {},
    )
