"""Test data factories: small functions over the services, so tests build data the way the app does."""
from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model

from projects.models import Membership, Project, Role, TaskSpec

PASSWORD = "correct-horse-battery"
_counter = itertools.count(1)

__all__ = ["PASSWORD", "make_user", "make_project", "make_task", "make_member", "demo"]


def make_user(username: str | None = None, *, staff: bool = False):
    username = username or f"user{next(_counter)}"
    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    if staff:
        user.is_staff = user.is_superuser = True
        user.save()
    return user


def make_project(name: str | None = None) -> Project:
    n = next(_counter)
    name = name or f"Project {n}"
    return Project.objects.create(name=name, slug=f"p{n}-{name.lower().replace(' ', '-')}"[:64])


def make_member(project: Project, user, role: str = Role.ANNOTATOR) -> Membership:
    return Membership.objects.create(project=project, user=user, role=role)


def make_task(project: Project, task_name: str = "click-button", split: str = "train", **kw) -> TaskSpec:
    return TaskSpec.objects.create(project=project, task_name=task_name, split=split, **kw)


@pytest.fixture
def demo(db):
    """A project with one user per role, an outsider in another project, and staff."""
    project = make_project("Alpha")
    other = make_project("Beta")
    users = {
        "annotator": make_user("ann"),
        "manager": make_user("man"),
        "admin": make_user("adm"),
        "outsider": make_user("out"),
        "staff": make_user("root", staff=True),
    }
    make_member(project, users["annotator"], Role.ANNOTATOR)
    make_member(project, users["manager"], Role.MANAGER)
    make_member(project, users["admin"], Role.ADMIN)
    make_member(other, users["outsider"], Role.ADMIN)
    task = make_task(project)
    return {"project": project, "other": other, "task": task, **users}


def make_tiny_checkpoint(project: Project, path, name: str = "untrained"):
    """An untrained tiny checkpoint on disk, registered and deployed for `project`."""
    from training import deployments
    from trainer.model import save_tiny_untrained

    save_tiny_untrained(path)
    checkpoint = deployments.checkpoint_register(project=project, name=name, uri=str(path))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, reason="test")
    return checkpoint


__all__ += ["make_tiny_checkpoint"]


@pytest.fixture
def rollout_project(tmp_path_factory):
    """A project whose click-button task is served by a deployed untrained tiny checkpoint, and a manager's client."""
    from rest_framework.test import APIClient

    project = make_project()
    manager = make_user()
    make_member(project, manager, "manager")
    task = make_task(project, "click-button", max_steps=12)
    checkpoint = make_tiny_checkpoint(project, tmp_path_factory.mktemp("ckpt") / "untrained")
    client = APIClient()
    client.force_authenticate(manager)
    return project, task, checkpoint, client


__all__ += ["rollout_project"]


def jpeg(seed: int = 0) -> bytes:
    """A small, real JPEG whose bytes depend on ``seed`` (screenshots are stored by content hash)."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (seed * 37 % 256, seed * 91 % 256, 120)).save(buffer, format="JPEG")
    return buffer.getvalue()


def make_finished_episode(project: Project, task: TaskSpec, *, steps: list[dict], mode: str = "autonomous",
                          reward: float | None = 1.0, outcome: str = "", created_by=None, checkpoint=None):
    """A finished episode whose steps are stored through the same service the rollout worker uses.

    Each step spec may give ``action`` (a dict, None for a void turn), ``thought``, ``actor``,
    ``proposal`` (the model's overridden turn: {"thought", "action", "raw"}), ``reward``, ``human_thought`` and
    ``rejections`` (proposals a person rejected before the step ran: {"action", "thought", "raw", "reason"}).
    """
    from rollouts import episodes
    from rollouts.models import Episode
    from rollouts.steps import rejection_record, step_record

    episode = Episode.objects.create(project=project, task=task, seed=next(_counter), mode=mode, status="running",
                                     created_by=created_by, checkpoint=checkpoint)
    for index, spec in enumerate(steps):
        action = spec.get("action", {"name": "click", "args": {"x": 10 + index, "y": 20}})
        thought = spec.get("thought", f"step {index}")
        raw = spec.get("raw") or (f"Thought: {thought}\nAction: click(x={action['args']['x']}, y=20)" if action else "gibberish")
        prompt = [{"role": "system", "content": "sys"},
                  {"role": "user", "content": [{"type": "text", "text": f"Instruction: do {index}"},
                                               {"type": "image_url", "image_url": {"url": "screenshot"}}]}]
        for attempt, rejected in enumerate(spec.get("rejections", []), 1):
            rejection_record(
                episode=episode, index=index, attempt=attempt,
                prompt=[*prompt[:1], {"role": "user", "content": f"Instruction: do {index} (attempt {attempt})"}],
                raw_output=rejected.get("raw", ""), token_ids=[4, 5], token_logprobs=[-1.0, -2.0],
                thought=rejected.get("thought", ""), action=rejected.get("action"), action_text="",
                void_reason=None if rejected.get("action") else "no action", reason=rejected.get("reason", ""),
                repeated=False)
        step = step_record(
            episode=episode, index=index, screenshot=jpeg(episode.pk * 100 + index), width=16, height=16,
            url="/task.html", instruction="Click it", elements=[], prompt=prompt, raw_output=raw,
            token_ids=[1, 2, 3], token_logprobs=[-0.1, -0.2, -0.3], thought=thought, action=action,
            action_text="", actor=spec.get("actor", "model"), proposal=spec.get("proposal"),
            reward=spec.get("reward", 0.0), done=index == len(steps) - 1, void_reason=None if action else "no action",
            info={}, timings={})
        if spec.get("human_thought"):
            step.human_thought = spec["human_thought"]
            step.save(update_fields=["human_thought"])
    return episodes.episode_finish(episode_id=episode.pk, status="finished", end_reason="done", reward=reward,
                                   outcome=outcome)
