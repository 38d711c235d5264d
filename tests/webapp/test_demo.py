"""What `make run` seeds in the demo project beyond MiniWoB: web-app tasks (the desktop ones are in
tests/flywheel/test_desktop_rollouts.py, beside the worker that runs them)."""
from pathlib import Path

import pytest

from webapp import demo

pytestmark = pytest.mark.django_db


def _webapp_tasks() -> dict[str, int]:
    from projects.models import TaskSpec

    return dict(TaskSpec.objects.filter(project__slug="demo", env_kind="webapp", split="train")
                .values_list("task_name", "max_steps"))


def test_demo_project_gets_the_shop_tasks_and_the_wiki_ones_only_where_mediawiki_is_installed(monkeypatch, caplog):
    from agent.envs import tasks_for

    shipped = tasks_for("webapp")
    monkeypatch.setattr(demo, "wiki_missing", lambda: [])
    demo.seed_demo("a-demo-password")
    seeded = _webapp_tasks()
    assert set(seeded) == set(demo.DEMO_WEBAPP_TASKS)
    assert all(seeded[name] == shipped[name].max_steps for name in seeded)  # each task's own step budget
    demo.seed_demo("a-demo-password")  # a second start adds nothing
    assert len(_webapp_tasks()) == len(demo.DEMO_WEBAPP_TASKS)

    from projects.models import TaskSpec

    TaskSpec.objects.filter(env_kind="webapp").delete()
    monkeypatch.setattr(demo, "wiki_missing", lambda: ["mediawiki", "php-cli"])
    demo.seed_demo("a-demo-password")
    assert set(_webapp_tasks()) == {name for name in demo.DEMO_WEBAPP_TASKS if name.startswith("shop-")}
    assert "no wiki-edit-page task, as mediawiki, php-cli are not installed" in caplog.text


def test_demo_project_holds_out_tasks_v0_was_not_trained_on_with_an_authored_shop_task_and_its_teacher():
    """Issue 34: the cycles' evaluation has something left to learn: MiniWoB tasks outside the cold start's and an
    authored web-app task on the shop (its JSON stored, as the Tasks page stores one), whose train task is seeded."""
    from projects.models import TaskSpec
    from trainer.configs import ColdstartConfig, parse_tasks

    TASKS = parse_tasks(ColdstartConfig().tasks)  # the cold start's demonstrated tasks
    demo.seed_demo("a-demo-password")
    held = {t.task_name: t for t in TaskSpec.objects.filter(project__slug="demo", split="eval")}
    assert set(TASKS) < set(held) and {"click-dialog", "click-tab"} <= set(held)
    shop = held[demo.DEMO_AUTHORED_EVAL["task_id"]]
    assert (shop.env_kind, shop.definition, shop.seed_start, shop.seed_end) == ("webapp", demo.DEMO_AUTHORED_EVAL, 0, 0)
    # its teachers: the same page and steps on four other products, so that what carries over is the step
    from agent.envs.webapp.tasks import load_task_file

    shipped = {task.task_id: task for task in load_task_file(Path(demo.__file__).resolve().parent.parent / "agent" /
                                                             "envs" / "webapp" / "tasks" / "shop.json")}
    teachers = set(TaskSpec.objects.filter(project__slug="demo", split="train", env_kind="webapp",
                                           task_name__in=demo.DEMO_AUTHORED_TEACHERS).values_list("task_name", flat=True))
    assert teachers == set(demo.DEMO_AUTHORED_TEACHERS) and len(teachers) == 4
    products = {shipped[name].eval["site_state"][0]["product"] for name in teachers}
    assert len(products) == 4 and "Studio Earbuds" not in products
    assert all(shipped[name].start_url == demo.DEMO_AUTHORED_EVAL["start_url"] for name in teachers)
    assert not TaskSpec.objects.filter(project__slug="demo", split="train",
                                       task_name=demo.DEMO_AUTHORED_EVAL["task_id"]).exists()
    demo.seed_demo("a-demo-password")  # a second start adds nothing
    assert TaskSpec.objects.filter(project__slug="demo", split="eval").count() == len(held)


@pytest.mark.django_db
def test_the_demo_project_starts_with_the_cycle_recipe_for_its_pretrained_v0_and_keeps_a_managers_change():
    from cycles import cycle_settings

    project = demo.seed_demo("a-demo-password")
    assert cycle_settings.settings_of(project)["recipe"] == cycle_settings.PRETRAINED_LORA["recipe"]
    assert cycle_settings.settings_of(project)["replay_ratio"] == 1.0
    cycle_settings.settings_set(project=project, actor=None, replay_ratio=2.0)
    project = demo.seed_demo("a-demo-password")  # a later start changes nothing a manager set
    assert cycle_settings.settings_of(project)["replay_ratio"] == 2.0
