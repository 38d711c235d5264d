"""Accounts-level records: API tokens (the audit log is core.models.AuditEntry)."""
from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for scripts. Only its sha256 is stored; revoking sets `revoked_at`."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8, help_text="First characters, to tell tokens apart.")
    name = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}…"
