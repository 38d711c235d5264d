"""One episode of a Loupe task played through the environment service, as a multi-turn RL loop drives it (verl's
agent loop, agent_loop.py): verl-free, so Loupe's tests run it without verl.

The first screen joins the prompt; each answer of the model (Loupe's ``Thought: ... Action: ...`` text, or the
format the lease names) is stepped on the leased env; the next screen comes back as the user's next turn; the reward
is the env's at the end (the task's own check, through the service's ``/end`` when the model stops first). An answer
the service cannot read is a void turn: stored in Loupe, told to the model, counted. The episode is an Episode in
Loupe, marked with the run."""
from __future__ import annotations

import os

from agent.prompt import render_observation
from envservice.client import EnvServiceClient, ServiceError, observation_of

def client_from_env() -> EnvServiceClient:
    """The service and token a launch names: LOUPE_ENV_SERVICE and LOUPE_ENV_TOKEN."""
    url, token = os.environ.get("LOUPE_ENV_SERVICE", ""), os.environ.get("LOUPE_ENV_TOKEN", "")
    if not url or not token:
        raise RuntimeError("set LOUPE_ENV_SERVICE (the environment service's URL) and LOUPE_ENV_TOKEN (a project "
                           "manager's API token) for the Loupe agent loop")
    return EnvServiceClient(url, token, timeout=float(os.environ.get("LOUPE_ENV_TIMEOUT", "600")))


class LoupeEpisode:
    """A lease on the service for one episode of ``task`` (project ``project``) on ``seed``."""

    def __init__(self, client: EnvServiceClient, *, project: int, task: str, seed: int, run: str,
                 style: str = "full", action_format: str = "loupe"):
        self.client, self.project, self.task, self.seed, self.run = client, project, task, seed, run
        self.style, self.action_format = style, action_format
        self.lease: str | None = None
        self.episode: int | None = None
        self.done = False
        self.reward: float | None = None
        self.steps = self.void = 0

    def start(self) -> str:
        """Lease an env reset to the task and seed; the first screen as text."""
        lease = self.client.lease(project=self.project, task=self.task, seed=self.seed, run=self.run,
                                  format=self.action_format)
        self.lease, self.episode = lease["lease"], lease["episode"]
        return self._screen(lease["observation"])

    def act(self, answer: str) -> str | None:
        """Step the model's answer; the next user turn (the screen, or why the answer could not be read), or None
        when the episode is over."""
        try:
            step = self.client.step(self.lease, answer)
        except ServiceError as exc:
            if exc.status == 400:
                self.void += 1
                return f"Your answer could not be read: {exc.detail}"
            if exc.status in (409, 502):  # ended (a person finished it, or rejected: told) or the env crashed
                if exc.status == 409 and "rejected" in exc.detail:
                    return exc.detail
                self.done, self.reward = True, 0.0
                return None
            raise
        self.steps += len(step.get("steps") or [None])
        if step["done"]:
            self.done, self.reward = True, float(step["reward"])
            return None
        people = [s["action_text"] for s in step.get("steps") or [] if s.get("actor") != "model"]
        told = f"A person took over and acted: {'; '.join(people)}.\n" if people else ""
        return told + self._screen(step["observation"])

    def finish(self) -> float:
        """The episode's reward (ended and scored by the task's check now if the model stopped first); the lease
        goes back."""
        try:
            if not self.done and self.lease is not None:
                ended = self.client.end(self.lease)
                self.done, self.reward = True, float(ended.get("reward") or 0.0)
        finally:
            self.close()
        return float(self.reward or 0.0)

    def close(self) -> None:
        if self.lease is not None:
            try:
                self.client.release(self.lease)
            except ServiceError:  # already gone (expired)
                pass
            self.lease = None

    def _screen(self, payload: dict) -> str:
        return "The screen now:\n" + render_observation(observation_of(payload), self.style)
