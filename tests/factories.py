"""Test data factories: small functions over the services, so tests build data the way the app does."""
from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model

from flywheel.models import Membership, Project, Role, TaskSpec

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
    from flywheel import services
    from trainer.model import save_tiny_untrained

    save_tiny_untrained(path)
    checkpoint = services.checkpoint_register(project=project, name=name, uri=str(path))
    services.deployment_promote(project=project, checkpoint=checkpoint, reason="test")
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
