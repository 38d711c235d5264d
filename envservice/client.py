"""A client of the environment service, for RL jobs and the bench: plain urllib, Django-free.

    client = EnvServiceClient("http://envhost:8200", token)
    lease = client.lease(project=1, task="click-button", seed=3)
    step = client.step(lease["lease"], "Action: click(x=24, y=63)")
    client.release(lease["lease"])

A refusal raises :class:`ServiceError` with the HTTP status and the service's plain-language ``detail``."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

from agent.envs import Element, Observation


class ServiceError(Exception):
    def __init__(self, status: int, body: dict):
        super().__init__(f"{status}: {body.get('detail', body)}")
        self.status = status
        self.body = body
        self.detail = body.get("detail", "")


def observation_of(payload: dict) -> Observation:
    """The service's observation JSON as agent.envs' Observation (what policies and solvers read)."""
    return Observation(instruction=payload["instruction"], url=payload["url"],
                       screenshot=base64.b64decode(payload["screenshot"]), width=payload["width"],
                       height=payload["height"], elements=[Element(**e) for e in payload["elements"]],
                       screen_text=payload.get("screen_text", ""))


class EnvServiceClient:
    def __init__(self, base_url: str, token: str, *, timeout: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.base_url}{path}", data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"detail": raw.decode(errors="replace")[:500]}
            raise ServiceError(exc.code, body) from None

    def lease(self, *, project: int, task: str | int, seed: int | None = None, format: str = "loupe",
              run: str = "") -> dict:
        """Lease an env reset to ``task`` and ``seed``; ``run`` names the RL run playing (its episodes carry it)."""
        body = {"project": project, "task": str(task), "format": format, "run": run}
        if seed is not None:
            body["seed"] = seed
        return self._call("POST", "/v1/leases", body)

    def get(self, lease_id: str) -> dict:
        return self._call("GET", f"/v1/leases/{lease_id}")

    def reset(self, lease_id: str, *, seed: int | None = None) -> dict:
        return self._call("POST", f"/v1/leases/{lease_id}/reset", {} if seed is None else {"seed": seed})

    def step(self, lease_id: str, action: str, *, format: str | None = None) -> dict:
        body = {"action": action} if format is None else {"action": action, "format": format}
        return self._call("POST", f"/v1/leases/{lease_id}/step", body)

    def end(self, lease_id: str) -> dict:
        """End the episode where it stands; its reward is the task's own check (None where the env has none)."""
        return self._call("POST", f"/v1/leases/{lease_id}/end", {})

    def release(self, lease_id: str) -> None:
        self._call("DELETE", f"/v1/leases/{lease_id}")

    def status(self) -> dict:
        return self._call("GET", "/v1/status")

    def schema(self) -> dict:
        return self._call("GET", "/openapi.json")
