"""Every service host's capacity and how busy it is, for the admin's status page.

Each host writes its report into one Redis hash at every reaper sweep (a few seconds apart), so the web app reads
all hosts behind the same Redis without calling them; a host that stops reporting shows as silent, and is dropped
after an hour. A host that stops cleanly takes its report back."""
from __future__ import annotations

import json
import logging
import time

import redis
from django.conf import settings

log = logging.getLogger(__name__)

KEY = "loupe:envservice:hosts"
SILENT_AFTER_S = 30.0  # several sweeps missed: the host is gone or stuck
FORGOTTEN_AFTER_S = 3600.0

_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    return _client


def host_publish(report: dict) -> None:
    """Write this host's report (EnvService.status() with its ``address``), stamped now."""
    _redis().hset(KEY, report["address"], json.dumps({**report, "reported_at": time.time()}))


def host_withdraw(address: str) -> None:
    _redis().hdel(KEY, address)


def hosts_status(*, now: float | None = None) -> dict:
    """Every host's last report (``silent`` when it is older than SILENT_AFTER_S) and the totals of the hosts still
    reporting: capacity, leased, idle (warm) envs per kind."""
    now = time.time() if now is None else now
    hosts, totals = [], {}
    for address, raw in sorted(_redis().hgetall(KEY).items()):
        report = json.loads(raw)
        age = now - report.get("reported_at", 0)
        if age > FORGOTTEN_AFTER_S:
            host_withdraw(address.decode())
            continue
        report["age_s"] = round(age, 1)
        report["silent"] = age > SILENT_AFTER_S
        hosts.append(report)
        if report["silent"]:
            continue
        for pool in report["pools"]:
            total = totals.setdefault(pool["kind"], {"kind": pool["kind"], "capacity": 0, "leased": 0, "idle": 0})
            for field in ("capacity", "leased", "idle"):
                total[field] += pool[field]
    return {"hosts": hosts, "kinds": sorted(totals.values(), key=lambda t: t["kind"])}
