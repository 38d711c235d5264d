import pytest
from rest_framework.test import APIClient


@pytest.mark.django_db(transaction=True)
def test_health_is_ok_with_a_live_worker(celery_worker):
    response = APIClient().get("/api/v1/health")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert body["checks"]["database"]["version"]
    assert body["checks"]["redis"]["version"]
    assert body["checks"]["celery"]["workers"]


@pytest.mark.django_db
def test_health_is_degraded_without_a_worker():
    response = APIClient().get("/api/v1/health")
    body = response.json()
    assert response.status_code == 503
    assert body["checks"]["database"]["ok"] and body["checks"]["channel_layer"]["ok"]
    assert body["checks"]["celery"]["ok"] is False
    assert "no Celery worker" in body["checks"]["celery"]["error"]


@pytest.mark.django_db
def test_a_degraded_probe_is_no_error_line_and_a_turn_to_degraded_is_one_warning(caplog, monkeypatch):
    from webapp import api

    monkeypatch.setattr(api, "_last_health", True)  # it was healthy; now no worker answers
    caplog.set_level("INFO")
    for _ in range(3):
        assert APIClient().get("/api/v1/health").status_code == 503
    assert not [r for r in caplog.records if r.name == "django.request"]  # no "Service Unavailable" per probe
    warnings = [r for r in caplog.records if r.name == "webapp.api" and r.levelname == "WARNING"]
    assert len(warnings) == 1 and "no Celery worker" in warnings[0].getMessage()
