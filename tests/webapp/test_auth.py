from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from core.errors import ApplicationError
from core.limits import LIMITS
from tests.factories import PASSWORD, make_user
from webapp import auth
from webapp.models import ApiToken

pytestmark = pytest.mark.django_db


def token_for(client: APIClient, username: str) -> str:
    response = client.post("/api/v1/auth/token", {"username": username, "password": PASSWORD}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["token"]


def test_token_login_gives_a_bearer_token_that_authenticates():
    make_user("alice")
    client = APIClient()
    token = token_for(client, "alice")
    response = client.get("/api/v1/auth/me", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert response.json()["username"] == "alice"


def test_wrong_password_is_401_with_a_message():
    make_user("alice")
    response = APIClient().post("/api/v1/auth/token", {"username": "alice", "password": "nope"}, format="json")
    assert response.status_code == 401
    assert response.json()["detail"] == "Wrong username or password."


def test_revoked_token_is_refused():
    make_user("alice")
    client = APIClient()
    token = token_for(client, "alice")
    assert client.delete("/api/v1/auth/token", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 204
    response = client.get("/api/v1/auth/me", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_expired_token_is_refused():
    make_user("alice")
    client = APIClient()
    token = token_for(client, "alice")
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.get("/api/v1/auth/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401


def test_anonymous_request_is_401_and_says_how_to_authenticate():
    response = APIClient().get("/api/v1/projects/")
    assert response.status_code == 401
    assert "Bearer" in response.json()["detail"]


def test_malformed_json_is_400_with_a_message():
    make_user("alice")
    response = APIClient().post("/api/v1/auth/token", data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["detail"]


def test_unknown_field_is_400_naming_the_field():
    make_user("alice")
    response = APIClient().post("/api/v1/auth/token", {"username": "alice", "password": PASSWORD, "admin": True},
                                format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == {"admin": ["Unknown field."]}


def test_login_is_throttled_after_repeated_failures(settings):
    settings.LOUPE_LOGIN_ATTEMPTS = 3
    make_user("alice")
    client = APIClient()
    statuses = [client.post("/api/v1/auth/token", {"username": "alice", "password": "x"}, format="json").status_code
                for _ in range(4)]
    assert statuses == [401, 401, 401, 429]
    # even the right password waits out the throttle
    right = client.post("/api/v1/auth/token", {"username": "alice", "password": PASSWORD}, format="json")
    assert right.status_code == 429


def test_session_login_requires_csrf_and_then_works():
    make_user("alice")
    client = APIClient(enforce_csrf_checks=True)
    client.get("/api/v1/auth/session")  # sets the csrftoken cookie
    csrf = client.cookies["csrftoken"].value
    refused = client.post("/api/v1/auth/session", {"username": "alice", "password": PASSWORD}, format="json")
    assert refused.status_code == 403
    ok = client.post("/api/v1/auth/session", {"username": "alice", "password": PASSWORD}, format="json",
                     HTTP_X_CSRFTOKEN=csrf)
    assert ok.status_code == 200
    assert client.get("/api/v1/auth/session").json()["user"]["username"] == "alice"
    csrf = client.cookies["csrftoken"].value
    assert client.delete("/api/v1/auth/session", HTTP_X_CSRFTOKEN=csrf).status_code == 204
    assert client.get("/api/v1/auth/session").status_code == 401


def test_openapi_schema_is_served():
    response = APIClient().get("/api/v1/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/projects/" in schema["paths"]


def test_the_schema_gives_each_typed_text_field_its_limit():
    schemas = APIClient().get("/api/v1/openapi.json").json()["components"]["schemas"]
    expected = {("TokenCreateInputRequest", "name"): "token_name",
                ("PatchedProjectUpdateInputRequest", "name"): "project_name",
                ("SnapshotCreateInputRequest", "name"): "snapshot_name",
                ("TaskCreateInputRequest", "task_name"): "task_id",
                ("TaskCreateInputRequest", "instruction_template"): "task_instruction",
                ("PatchedTaskUpdateInputRequest", "instruction_template"): "task_instruction",
                ("ReviewInputRequest", "comment"): "review_comment",
                ("QueueCreateInputRequest", "name"): "queue_name",
                ("AdjudicateInputRequest", "comment"): "adjudication_comment"}
    for (schema, field), kind in expected.items():
        assert schemas[schema]["properties"][field]["maxLength"] == LIMITS[kind], (schema, field)


def test_a_token_name_is_kept_whole_up_to_its_limit_and_refused_past_it():
    alice = make_user("alice")
    name = "t" * LIMITS["token_name"]
    body = {"username": "alice", "password": PASSWORD}
    over = APIClient().post("/api/v1/auth/token", {**body, "name": name + "!"}, format="json")
    assert over.status_code == 400
    assert f"The token name is {len(name) + 1:,} characters long" in over.json()["errors"]["name"][0]
    assert not ApiToken.objects.exists()
    with pytest.raises(ApplicationError):  # the service refuses too: no path cuts
        auth.token_create(user=alice, name=name + "!")
    assert APIClient().post("/api/v1/auth/token", {**body, "name": name}, format="json").status_code == 201
    assert ApiToken.objects.get().name == name


def test_unknown_api_path_is_json_404():
    response = APIClient().get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert "openapi.json" in response.json()["detail"]


def test_the_suite_uses_the_fast_test_hasher(settings):
    # guards the suite's speed: PBKDF2 would make every login take seconds on 2 cores
    assert settings.PASSWORD_HASHERS == ["django.contrib.auth.hashers.MD5PasswordHasher"]
