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
