"""The demo data `make run` seeds: users admin / manager / annotator in a demo project with MiniWoB++, desktop and
web-app tasks."""
from __future__ import annotations

import logging
import os
import secrets
import shutil

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from agent.envs import tasks_for
from agent.envs.webapp import sites
from cycles import cycle_settings
from projects.models import Membership, Project, Role, Split, TaskSpec
from projects.taskspec_authoring import definition_check

DEMO_USERS = {"admin": Role.ADMIN, "manager": Role.MANAGER, "annotator": Role.ANNOTATOR}
DEMO_TRAIN_TASKS = [
    "click-test", "click-test-2", "click-button", "click-link", "click-dialog", "click-tab", "click-checkboxes",
    "click-option", "focus-text", "focus-text-2", "enter-text", "enter-password", "login-user",
]
# Held out for every cycle's evaluation: v0's three cold-start tasks (trainer/coldstart.py TASKS) and tasks it was not
# trained on, where people's corrections are what teaches it (issue 34): four MiniWoB tasks (two of one click that v0
# gets right about half the time, two of several steps it has never seen) and an authored shop task (README, Sizing:
# the demo's held-out tasks).
DEMO_EVAL_TASKS = ["click-button", "click-link", "focus-text", "click-dialog", "click-tab", "click-option", "enter-text"]
# An authored web-app task (WebArena JSON) held out on the shipped shop: shop-add-to-basket's page and steps (open the
# product, add it, finish), another product. The train tasks whose supervised episodes teach it are
# DEMO_AUTHORED_TEACHERS: the same steps for four other products of the page, annotated in turn. Shown one product
# only, the model learnt to add that product (the held-out one stayed at 0 % in every evaluation); shown several, what
# carries over is the step itself: open the product the request names, add it.
DEMO_AUTHORED_EVAL = {
    "sites": ["shopping"], "task_id": "shop-add-earbuds", "require_login": False,
    "start_url": "__SHOP__/catalogue/category/electronics/audio_6/", "intent": 'Add the "Studio Earbuds" to the basket.',
    "max_steps": 10,
    "eval": {"eval_types": ["site_state"],
             "site_state": [{"check": "basket_line", "product": "Studio Earbuds", "quantity": 1}]},
}
DEMO_AUTHORED_TEACHERS = ("shop-add-to-basket", "shop-add-headphones", "shop-add-radio", "shop-add-turntable")
DEMO_AUTHORED_TEACHER = DEMO_AUTHORED_TEACHERS[0]  # the one that stands for them in a cycle's share of episodes
EVAL_SEEDS = (100_000, 100_099)  # never used for training rollouts
# Desktop tasks (agent/envs/desktop; one hybrid) for supervised sessions on a Linux desktop; train split only, so the
# cycles' evaluations stay on MiniWoB. Each is seeded only where its programs are installed (`make env-tools`).
DESKTOP_PROGRAMS = ("Xvfb", "openbox", "dbus-daemon")  # every desktop task; then each task's own apps:
DEMO_DESKTOP_TASKS = {
    "desktop-calc-multiply": ("galculator",), "desktop-mousepad-write": ("mousepad",),
    "desktop-terminal-greeting": ("xterm",), "desktop-files-archive": ("xterm",),
    "desktop-sheet-total": ("gnumeric",), "desktop-hybrid-count": ("mousepad",),
}

# Web-app tasks (agent/envs/webapp): the shop's (django-oscar, built by `make sites`, or on the first episode) always,
# the wiki's where MediaWiki is installed; train split, for supervised sessions on a real multi-page site.
DEMO_WEBAPP_TASKS = (*DEMO_AUTHORED_TEACHERS, "shop-price-answer", "shop-guest-checkout", "shop-admin-rename",
                     "wiki-standup-answer", "wiki-edit-page")

log = logging.getLogger(__name__)


def wiki_missing() -> list[str]:
    """The Debian packages the wiki's tasks need that this machine lacks (empty: they can run here)."""
    return sites.wiki_missing()


def desktop_missing(task: str | None = None) -> list[str]:
    """The programs a desktop episode (of ``task``) needs that this machine lacks (empty: it can run here)."""
    wanted = (*DESKTOP_PROGRAMS, *(DEMO_DESKTOP_TASKS[task] if task else ()))
    return [program for program in wanted if shutil.which(program) is None]


def demo_password() -> tuple[str, bool]:
    """(password, generated?) — from LOUPE_DEMO_PASSWORD, else generated once and kept in .data/."""
    if password := os.environ.get("LOUPE_DEMO_PASSWORD"):
        return password, False
    path = settings.DATA_DIR / "demo_password"
    if path.exists():
        return path.read_text().strip(), False
    password = secrets.token_urlsafe(9)
    path.write_text(password)
    path.chmod(0o600)
    return password, True


@transaction.atomic
def seed_demo(password: str) -> Project:
    User = get_user_model()
    project, _ = Project.objects.get_or_create(
        slug="demo", defaults={"name": "Demo project", "description": "MiniWoB++, desktop and web-app tasks; its policy, v0, is a LoRA of SmolLM2-135M-Instruct trained on scripted demonstrations."}
    )
    private, _ = Project.objects.get_or_create(
        slug="private", defaults={"name": "Private project", "description": "Only the admin is a member here."}
    )
    for username, role in DEMO_USERS.items():
        user, created = User.objects.get_or_create(username=username)
        if created or not user.check_password(password):
            user.set_password(password)
        user.is_staff = user.is_superuser = username == "admin"
        user.save()
        Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    Membership.objects.update_or_create(project=private, user=User.objects.get(username="admin"),
                                        defaults={"role": Role.ADMIN})
    # a first start: the recipe for v0's pretrained base, once
    if cycle_settings.CYCLE_SETTINGS.key not in (project.settings or {}):
        cycle_settings.settings_set(project=project, actor=None, **cycle_settings.PRETRAINED_LORA)
    for name in DEMO_TRAIN_TASKS:
        TaskSpec.objects.get_or_create(project=project, env_kind="miniwob", task_name=name, split=Split.TRAIN,
                                       defaults={"seed_start": 0, "seed_end": 99_999, "max_steps": 8})
    for name in DEMO_EVAL_TASKS:
        TaskSpec.objects.get_or_create(project=project, env_kind="miniwob", task_name=name, split=Split.EVAL,
                                       defaults={"seed_start": EVAL_SEEDS[0], "seed_end": EVAL_SEEDS[1], "max_steps": 8})
    authored, stored = definition_check(env_kind="webapp", definition=DEMO_AUTHORED_EVAL)
    TaskSpec.objects.get_or_create(project=project, env_kind="webapp", task_name=authored.task_id, split=Split.EVAL,
                                   defaults={"seed_start": 0, "seed_end": 0, "max_steps": authored.max_steps,
                                             "definition": stored})
    for name in DEMO_DESKTOP_TASKS:
        missing = desktop_missing(name)
        if missing:
            log.warning("Demo project: no %s task, as %s %s not installed (`make env-tools` installs them).", name,
                        ", ".join(missing), "is" if len(missing) == 1 else "are")
            continue
        TaskSpec.objects.get_or_create(project=project, env_kind="desktop", task_name=name, split=Split.TRAIN,
                                       defaults={"seed_start": 0, "seed_end": 0, "max_steps": 15})
    no_wiki = wiki_missing()
    webapp_tasks = tasks_for("webapp")
    for name in DEMO_WEBAPP_TASKS:
        if name.startswith("wiki-") and no_wiki:
            log.warning("Demo project: no %s task, as %s %s not installed (`make env-tools` installs them).", name,
                        ", ".join(no_wiki), "is" if len(no_wiki) == 1 else "are")
            continue
        TaskSpec.objects.get_or_create(project=project, env_kind="webapp", task_name=name, split=Split.TRAIN,
                                       defaults={"seed_start": 0, "seed_end": 0, "max_steps": webapp_tasks[name].max_steps})
    return project
