"""The environment service over real HTTP: a threaded server in this process, real Chromium MiniWoB envs, the
test database, tokens as scripts use them."""
from __future__ import annotations

import threading

import pytest

from envservice.server import start, stop
from projects.models import Role
from tests.factories import make_member, make_project, make_task, make_user
from webapp.auth import token_create

TASK = "enter-text"  # three steps: click the field, type, submit


@pytest.fixture
def service():
    server, svc = start(host="127.0.0.1", port=0, pools={"miniwob": {"warm": 0, "capacity": 4}}, lease_timeout=600)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", svc
    stop(server, svc)


@pytest.fixture
def manager_token():
    project = make_project()
    make_task(project, TASK)
    user = make_user()
    make_member(project, user, Role.MANAGER)
    return project, token_create(user=user)[1]


class TakenOverService:
    """The service's answers when a person took over the episode and acted twice before handing back."""

    OBS = {"instruction": "Enter \"a\".", "url": "", "width": 160, "height": 210, "elements": [], "screen_text": "",
           "image_format": "jpeg", "screenshot": ""}

    def lease(self, **kwargs):
        return {"lease": "L", "episode": 1, "observation": self.OBS}

    def step(self, lease, action):
        return {"done": False, "reward": 0.0, "observation": self.OBS, "taken_over": True,
                "steps": [{"actor": "human", "action_text": "click(x=1, y=2)"},
                          {"actor": "human", "action_text": "type(text=\"a\")"}]}
