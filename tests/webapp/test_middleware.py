"""Errors the API answers outside DRF's exception handler are JSON too (webapp/middleware.py, webapp/urls.py);
each case here was a non-JSON answer the fuzz run (tests/webapp/test_fuzz.py) found."""
import json

import pytest
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from tests.factories import make_member, make_project, make_task, make_user
from webapp.middleware import ApiJsonErrorMiddleware

pytestmark = pytest.mark.django_db


def detail(response) -> str:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    return json.loads(response.content)["detail"]


def test_a_write_to_an_unknown_api_url_is_a_json_404_not_a_csrf_page():
    response = Client(enforce_csrf_checks=True).post("/api/v1/no/such/thing", {"a": 1})
    assert response.status_code == 404
    assert "no API endpoint" in detail(response)


def test_a_path_with_an_encoded_newline_is_a_json_404():
    response = Client().put("/api/v1/episodes/a%0Ab/review", "{}", content_type="application/json")
    assert response.status_code == 404
    assert "no API endpoint" in detail(response)


def test_an_api_request_for_a_host_the_server_does_not_answer_to_is_a_json_400():
    response = Client(HTTP_HOST="g").get("/api/v1/auth/me")
    assert response.status_code == 400
    assert "does not answer to the Host" in detail(response)


def test_a_page_request_for_a_host_the_server_does_not_answer_to_is_still_django_s_400_page():
    response = Client(HTTP_HOST="g").get("/projects")
    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")


def test_a_body_over_the_upload_limit_is_a_json_413(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = Client().post("/api/v1/auth/token", json.dumps({"username": "x" * 5000, "password": "y"}),
                             content_type="application/json")
    assert response.status_code == 413
    assert "1000 bytes" in detail(response)


def test_an_audio_chunk_body_is_read_only_up_to_the_limit(settings):
    settings.LOUPE_AUDIO_MAX_BYTES = 1024
    project, user = make_project(), make_user()
    make_member(project, user)
    from rollouts.models import Episode

    episode = Episode.objects.create(project=project, task=make_task(project), seed=1, mode="supervised")
    client = APIClient()
    client.force_authenticate(user)
    clip = client.post(f"/api/v1/episodes/{episode.pk}/audio/", {"client_id": "c", "content_type": "audio/webm",
                                                                 "started_at": 1.0}, format="json").json()
    response = client.generic("PUT", f"/api/v1/audio/{clip['id']}/chunks/0", b"\x1a\x45\xdf\xa3" * 1_000_000,
                              content_type="audio/webm", HTTP_X_CHUNK_START="1.0")
    assert response.status_code == 413
    assert "1024 bytes" in detail(response)


def test_an_unexpected_exception_under_api_is_a_json_500_and_elsewhere_left_to_django():
    middleware = ApiJsonErrorMiddleware(lambda request: None)
    api = middleware.process_exception(RequestFactory().get("/api/v1/projects/"), RuntimeError("bug"))
    assert api.status_code == 500 and "logged" in detail(api)
    assert middleware.process_exception(RequestFactory().get("/review/1"), RuntimeError("bug")) is None
