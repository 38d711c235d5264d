"""A training stage's own API token (flywheel reaches it through settings.LOUPE_RUN_TOKEN, knowing nothing of the web
shell): minted for the run's manager when an online rl stage starts, revoked when it ends. Its expiry bounds a
token whose worker died before revoking it."""
from __future__ import annotations

import contextlib
from datetime import timedelta

from django.utils import timezone

from core.models import AuditEntry
from webapp.auth import token_create
from webapp.models import ApiToken


@contextlib.contextmanager
def run_token(*, user, name: str, hours: float):
    """The raw token, for the duration of the block."""
    token, raw = token_create(user=user, name=name[:100])
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() + timedelta(hours=hours))
    try:
        yield raw
    finally:
        if ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()):
            AuditEntry.objects.create(actor=user, action="token.revoke", target=f"token:{token.pk}")
