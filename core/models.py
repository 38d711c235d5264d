"""The audit log: who did what, when, to which record of which project."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    """Who did what, when: interventions, reviews, snapshots, deployments, rollbacks, token changes."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=128, blank=True)
    project_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    data = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "webapp_auditentry"  # created by webapp's first migration; moved here with its rows
        ordering = ["-at"]
        verbose_name_plural = "audit entries"
