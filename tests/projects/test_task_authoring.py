"""Authored tasks through the services, the API and `manage.py tasks_import`: a desktop or webapp task written as its
own JSON is checked by the env's loader (its message on the definition field), named by its id, imported all or
none with every problem named (file, task, the unsupported getter), exported as the JSON it came as, and run by the
rollout worker from the JSON stored with it."""
import copy
import functools
import http.server
import json
import re
import threading
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from agent.envs.desktop import DESKTOP_TASKS
from core.limits import LIMITS
from core.models import AuditEntry
from projects import services
from projects import taskspec_authoring
from projects import taskspec_exchange
from rollouts.models import Checkpoint, Deployment, Episode, Step
from projects.models import TaskSpec
from tests.factories import make_member, make_project, make_user
from tests.stack import ChatModel, start_policy_server

pytestmark = pytest.mark.django_db

ANY_URL = {"task_id": "team-settings", "start_url": "http://127.0.0.1:8000/app/",
           "instruction": "Turn notifications off.",
           "check": {"type": "dom_content", "selector": "#status", "must_include": ["Notifications are off"]}}
OSWORLD = {"id": "my-notes", "instruction": "Create notes.txt in your home folder.", "config": [],
           "evaluator": {"func": "check_include_exclude", "result": {"type": "vm_command_line", "command": "ls ~"},
                         "expected": {"type": "rule", "rules": {"include": ["notes.txt"]}}}}
CLOUD = {**OSWORLD, "id": "from-the-cloud",
         "evaluator": {"func": "compare_table",
                       "result": {"type": "vm_file", "path": "/home/user/a.xlsx", "dest": "a.xlsx"},
                       "expected": {"type": "vm_screen_size"},
                       "options": {"rules": [{"type": "sheet_name"}]}}}


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def manager(demo):
    return client_for(demo["manager"]), demo["project"]


def tasks_url(project, tail: str = "") -> str:
    return f"/api/v1/projects/{project.pk}/tasks/{tail}"


def test_an_any_url_task_is_created_from_its_json_and_named_by_its_id(manager):
    client, project = manager
    response = client.post(tasks_url(project), {"env_kind": "webapp", "definition": ANY_URL}, format="json")
    assert response.status_code == 201, response.content
    task = response.json()
    assert (task["task_name"], task["env_kind"], task["source"]) == ("team-settings", "webapp", "authored")
    assert task["definition"] == ANY_URL and task["instruction_template"] == "Turn notifications off."
    assert task["max_steps"] == 30  # the any-URL format's own default
    again = client.post(tasks_url(project), {"env_kind": "webapp", "definition": ANY_URL}, format="json")
    assert again.status_code == 409 and "already a task of this project" in again.json()["detail"]


def test_a_bad_start_url_is_refused_on_the_definition_field_in_plain_words(manager):
    client, project = manager
    bad = {**ANY_URL, "start_url": "intranet/settings"}
    response = client.post(tasks_url(project), {"env_kind": "webapp", "definition": bad}, format="json")
    assert response.status_code == 400
    [message] = response.json()["errors"]["definition"]
    assert "start_url 'intranet/settings' is not a web address: it must start with http:// or https://" in message
    assert not TaskSpec.objects.filter(task_name="team-settings").exists()


@pytest.mark.parametrize("task_id", ["<script>alert(1)</script>", "новая задача <script>", "Team-Settings",
                                     "team settings", "-team"])
def test_a_task_id_that_is_not_a_slug_is_refused_saying_what_an_id_may_hold(manager, task_id):
    client, project = manager
    response = client.post(tasks_url(project), {"env_kind": "webapp", "definition": {**ANY_URL, "task_id": task_id}},
                           format="json")
    assert response.status_code == 400
    [message] = response.json()["errors"]["definition"]
    assert message.startswith(f"The task id '{task_id}' may hold only lowercase letters a-z, digits, '-' and '_'")
    osworld = client.post(tasks_url(project), {"env_kind": "desktop", "definition": {**OSWORLD, "id": task_id}},
                          format="json")
    assert osworld.status_code == 400 and "may hold only lowercase letters" in osworld.json()["detail"]
    assert not TaskSpec.objects.filter(project=project, definition__isnull=False).exists()


def test_the_page_checks_task_ids_with_the_servers_rule():
    page = (Path(__file__).resolve().parents[2] / "frontend" / "src" / "tasks" / "definitions.ts").read_text()
    assert re.search(r"export const TASK_ID = /\^(.*?)\$/;", page).group(1) == taskspec_authoring.TASK_ID.pattern
    assert taskspec_authoring.TASK_ID_RULE in page


def test_slug_ids_are_taken_osworld_uuids_and_webarena_numbers_included(manager):
    client, project = manager
    for env_kind, definition in (("webapp", {**ANY_URL, "task_id": "team_settings-2"}),
                                 ("desktop", {**OSWORLD, "id": "bb5e4c0d-f964-439c-97b6-bdb9747de3f4"}),
                                 ("webapp", {**ANY_URL, "task_id": 7})):
        response = client.post(tasks_url(project), {"env_kind": env_kind, "definition": definition}, format="json")
        assert response.status_code == 201, response.content


def test_an_over_long_instruction_is_refused_naming_the_limit_and_nothing_is_cut(manager):
    client, project = manager
    limit = LIMITS["task_instruction"]
    huge = {**ANY_URL, "instruction": "Turn it off. " * 16_000}  # about 200,000 characters
    response = client.post(tasks_url(project), {"env_kind": "webapp", "definition": huge}, format="json")
    assert response.status_code == 400
    [message] = response.json()["errors"]["definition"]
    assert f"The instruction is {len(huge['instruction']):,} characters long; the limit is {limit:,}" in message
    label = client.post(tasks_url(project), {"task_name": "click-link", "instruction_template": "x" * (limit + 1)},
                        format="json")
    assert label.status_code == 400 and "the limit is" in label.json()["errors"]["instruction_template"][0]
    with pytest.raises(taskspec_authoring.ApplicationError):  # the service refuses a label past the limit too
        services.task_create(project=project, actor=None, task_name="click-link",
                             instruction_template="x" * (limit + 1))
    whole = {**ANY_URL, "instruction": "y" * limit}
    kept = client.post(tasks_url(project), {"env_kind": "webapp", "definition": whole}, format="json")
    assert kept.status_code == 201 and kept.json()["instruction_template"] == "y" * limit


def test_a_task_with_several_problems_lists_every_one(manager):
    client, project = manager
    bad = {**ANY_URL, "task_id": "Team Settings", "instruction": "z" * (LIMITS["task_instruction"] + 1),
           "start_url": "intranet/settings"}
    response = client.post(tasks_url(project), {"env_kind": "webapp", "definition": bad, "seed_start": 5,
                                                 "seed_end": 1}, format="json")
    assert response.status_code == 400
    body = response.json()
    first, second, third = body["errors"]["definition"]
    assert "The task id 'Team Settings' may hold only" in first and "The instruction is" in second
    assert "start_url 'intranet/settings' is not a web address" in third
    assert body["errors"]["seed_end"] == ["The seed range ends before it starts."]
    assert body["detail"].startswith("4 problems; nothing was saved: (1) The task id")
    task = client.post(tasks_url(project), {"env_kind": "webapp", "definition": ANY_URL}, format="json").json()
    edit = client.patch(tasks_url(project, f"{task['id']}/"), {"definition": bad, "max_steps": 500}, format="json")
    assert edit.status_code == 400 and set(edit.json()["errors"]) == {"max_steps"}  # the serializer's own first
    edit = client.patch(tasks_url(project, f"{task['id']}/"), {"definition": bad, "seed_end": 0, "seed_start": 3},
                        format="json")
    assert edit.status_code == 400 and len(edit.json()["errors"]["definition"]) == 3
    assert edit.json()["errors"]["seed_end"] == ["The seed range ends before it starts."]
    assert TaskSpec.objects.get(pk=task["id"]).definition == ANY_URL


def test_an_osworld_task_with_an_unsupported_getter_is_refused_naming_it(manager):
    client, project = manager
    response = client.post(tasks_url(project), {"env_kind": "desktop", "definition": CLOUD}, format="json")
    assert response.status_code == 400
    assert "unsupported getter 'vm_screen_size' in evaluator.expected" in response.json()["errors"]["definition"][0]


def test_a_shipped_tasks_id_is_refused_unless_the_json_is_the_shipped_tasks_own(manager):
    client, project = manager
    shipped = copy.deepcopy(DESKTOP_TASKS["desktop-mousepad-write"].raw)
    changed = {**shipped, "instruction": "Something else."}
    refused = client.post(tasks_url(project), {"env_kind": "desktop", "definition": changed}, format="json")
    assert refused.status_code == 400
    assert "'desktop-mousepad-write' is the id of a shipped desktop task" in refused.json()["detail"]
    same = client.post(tasks_url(project), {"env_kind": "desktop", "definition": shipped}, format="json")
    assert same.status_code == 201, same.content
    assert same.json()["source"] == "shipped" and same.json()["definition"] is None


def test_only_desktop_and_webapp_tasks_are_written_as_json(manager):
    client, project = manager
    response = client.post(tasks_url(project), {"env_kind": "miniwob", "definition": ANY_URL}, format="json")
    assert response.status_code == 400
    assert "miniwob tasks cannot be written as JSON; choose one from the shipped list" in response.json()["detail"]
    nameless = client.post(tasks_url(project), {"env_kind": "miniwob"}, format="json")
    assert nameless.status_code == 400 and nameless.json()["detail"] == "Choose a miniwob task from the list."


def test_editing_a_definition_is_checked_and_a_refused_edit_changes_nothing(manager):
    client, project = manager
    task = client.post(tasks_url(project), {"env_kind": "webapp", "definition": ANY_URL}, format="json").json()
    edited = {**ANY_URL, "instruction": "Turn notifications off, then on."}
    response = client.patch(tasks_url(project, f"{task['id']}/"), {"definition": edited}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["definition"]["instruction"] == "Turn notifications off, then on."
    bad = {**ANY_URL, "check": {"type": "screenshot_diff"}}
    refused = client.patch(tasks_url(project, f"{task['id']}/"), {"definition": bad}, format="json")
    assert refused.status_code == 400 and "unknown check type 'screenshot_diff'" in refused.json()["detail"]
    assert TaskSpec.objects.get(pk=task["id"]).definition == edited


def test_a_definition_cannot_be_given_to_a_shipped_miniwob_task(manager, demo):
    client, project = manager
    response = client.patch(tasks_url(project, f"{demo['task'].pk}/"), {"definition": ANY_URL}, format="json")
    assert response.status_code == 400 and "cannot be written as JSON" in response.json()["detail"]


def test_an_import_is_all_or_nothing_and_names_the_file_the_task_and_the_getter(manager):
    client, project = manager
    before = TaskSpec.objects.count()
    response = client.post(tasks_url(project, "import"), {"format": "osworld", "tasks": [OSWORLD, CLOUD]},
                           format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["detail"].startswith("Nothing was imported: 1 problem found.")
    [problem] = body["errors"]["tasks"]
    assert "OSWorld task from-the-cloud (tasks[1])" in problem and "unsupported getter 'vm_screen_size'" in problem
    assert TaskSpec.objects.count() == before


def test_task_files_are_uploaded_one_task_or_a_list_a_file(manager):
    client, project = manager
    second = {**ANY_URL, "task_id": "team-profile", "check": {"type": "url_match", "url": "http://127.0.0.1:8000/me"}}
    files = [SimpleUploadedFile("one.json", json.dumps(ANY_URL).encode(), content_type="application/json"),
             SimpleUploadedFile("list.json", json.dumps([second]).encode(), content_type="application/json")]
    response = client.post(tasks_url(project, "import"), {"format": "webarena", "split": "eval", "files": files},
                           format="multipart")
    assert response.status_code == 201, response.content
    assert sorted((t["task_name"], t["split"]) for t in response.json()["results"]) == [
        ("team-profile", "eval"), ("team-settings", "eval")]
    assert AuditEntry.objects.filter(action="task.import", project_id=project.pk).count() == 1
    broken = SimpleUploadedFile("broken.json", b"{not json", content_type="application/json")
    refused = client.post(tasks_url(project, "import"), {"format": "webarena", "files": [broken]}, format="multipart")
    assert refused.status_code == 400 and "broken.json: not a readable JSON file" in refused.json()["detail"]


def test_an_import_lists_every_problem_of_each_task(manager):
    client, project = manager
    bad = {**CLOUD, "id": "<script>alert(1)</script>"}
    response = client.post(tasks_url(project, "import"), {"format": "osworld", "tasks": [bad]}, format="json")
    assert response.status_code == 400
    slug, getter = response.json()["errors"]["tasks"]
    assert slug.startswith("tasks[0]: The task id '<script>alert(1)</script>' may hold only")
    assert "unsupported getter 'vm_screen_size'" in getter


def test_an_import_names_ids_that_clash_within_it_or_with_the_projects_tasks(manager):
    client, project = manager
    client.post(tasks_url(project), {"env_kind": "webapp", "definition": ANY_URL}, format="json")
    twice = {**ANY_URL, "task_id": "twice"}
    response = client.post(tasks_url(project, "import"),
                           {"format": "webarena", "tasks": [ANY_URL, twice, twice]}, format="json")
    problems = response.json()["errors"]["tasks"]
    assert response.status_code == 400 and len(problems) == 2
    assert "tasks[0]: 'team-settings' (train) is already a task of this project" in problems[0]
    assert "tasks[2]: the task id 'twice' is also in tasks[1]" in problems[1]


def test_an_export_gives_authored_json_and_shipped_json_that_import_back_unchanged(manager, demo):
    client, project = manager
    client.post(tasks_url(project), {"env_kind": "desktop", "task_name": "desktop-mousepad-write"}, format="json")
    client.post(tasks_url(project), {"env_kind": "desktop", "definition": OSWORLD, "split": "eval"}, format="json")
    client.post(tasks_url(project), {"env_kind": "desktop", "definition": OSWORLD}, format="json")  # both splits
    response = client.get(tasks_url(project, "export?format=osworld"))
    assert response.status_code == 200
    assert 'attachment; filename="' in response["Content-Disposition"]
    exported = json.loads(response.content)
    assert exported == [DESKTOP_TASKS["desktop-mousepad-write"].raw, OSWORLD]
    other = make_project("Gamma")
    created = taskspec_exchange.task_import(project=other, actor=demo["manager"], format="osworld",
                                         files=[("export.json", response.content)])
    assert {(t.task_name, t.definition is None) for t in created} == {("desktop-mousepad-write", True),
                                                                        ("my-notes", False)}
    assert json.loads(client.get(tasks_url(project, "export?format=webarena")).content) == []
    unknown = client.get(tasks_url(project, "export?format=gaia"))
    assert unknown.status_code == 400 and "Unknown task format 'gaia'" in unknown.json()["detail"]


def test_annotators_may_not_import_or_export_and_outsiders_do_not_see_the_project(demo):
    project = demo["project"]
    for role, status in (("annotator", 403), ("outsider", 404)):
        client = client_for(demo[role])
        assert client.get(tasks_url(project, "export?format=osworld")).status_code == status
        response = client.post(tasks_url(project, "import"), {"format": "osworld", "tasks": [OSWORLD]}, format="json")
        assert response.status_code == status
        created = client.post(tasks_url(project), {"env_kind": "desktop", "definition": OSWORLD}, format="json")
        assert created.status_code == status
    assert not TaskSpec.objects.filter(task_name="my-notes").exists()


def test_the_catalogue_lists_each_kinds_shipped_tasks_and_its_format(demo):
    kinds = {k["kind"]: k for k in client_for(demo["annotator"]).get("/api/v1/tasks/catalogue").json()["kinds"]}
    assert set(kinds) == {"miniwob", "terminal", "desktop", "webapp"}
    assert (kinds["desktop"]["format"], kinds["webapp"]["format"], kinds["miniwob"]["format"]) == (
        "osworld", "webarena", None)
    names = {t["name"]: t for t in kinds["desktop"]["tasks"]}
    assert names["desktop-mousepad-write"]["description"].startswith("Write")


def test_the_command_imports_files_and_folders(demo, tmp_path):
    folder = tmp_path / "osworld"
    folder.mkdir()
    (folder / "notes.json").write_text(json.dumps(OSWORLD))
    (folder / "two.json").write_text(json.dumps([{**OSWORLD, "id": "my-notes-2"}, {**OSWORLD, "id": "my-notes-3"}]))
    call_command("tasks_import", "--format", "osworld", "--project", str(demo["project"].pk), "--split", "eval",
                 "--seeds", "100-199", str(folder))
    tasks = TaskSpec.objects.filter(project=demo["project"], env_kind="desktop").order_by("task_name")
    assert [(t.task_name, t.split, t.seed_start, t.seed_end) for t in tasks] == [
        ("my-notes", "eval", 100, 199), ("my-notes-2", "eval", 100, 199), ("my-notes-3", "eval", 100, 199)]


def test_the_command_refuses_a_file_with_an_unsupported_getter_and_imports_nothing(demo, tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "cloud.json"
    good.write_text(json.dumps(OSWORLD))
    bad.write_text(json.dumps(CLOUD))
    with pytest.raises(CommandError, match="Nothing was imported into Alpha: 1 problem"):
        call_command("tasks_import", "--format", "osworld", "--project", demo["project"].slug, str(good), str(bad))
    assert f"OSWorld task from-the-cloud ({bad}): unsupported getter 'vm_screen_size'" in capsys.readouterr().err
    assert not TaskSpec.objects.filter(env_kind="desktop").exists()
    with pytest.raises(CommandError, match="No project 'nope'"):
        call_command("tasks_import", "--format", "osworld", "--project", "nope", str(good))
    with pytest.raises(CommandError, match="no such file or folder"):
        call_command("tasks_import", "--format", "osworld", "--project", demo["project"].slug, str(tmp_path / "x"))


class _Finisher(ChatModel):
    """A policy server whose model ends every episode at once."""

    def answer(self, body: dict) -> str:
        return 'Thought: This is the page.\nAction: finished(answer="")'


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.django_db(transaction=True)
def test_the_rollout_worker_hands_an_authored_task_to_the_env_and_its_check_scores_the_episode(tmp_path, settings):
    """The worker's env knows only shipped tasks; the episode of an authored one runs from the JSON stored with it."""
    from rollouts import worker as rollout_worker

    (tmp_path / "index.html").write_text("<html><body><h1>Team app</h1></body></html>")
    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(tmp_path)))
    threading.Thread(target=site.serve_forever, daemon=True).start()
    policy = start_policy_server(_Finisher)
    settings.LOUPE_OPENAI_BASE_URL = f"http://127.0.0.1:{policy.server_address[1]}"
    project, manager = make_project(), make_user()
    make_member(project, manager, "manager")
    # the model the policy server "serves" (no weights are read on the openai backend)
    checkpoint = Checkpoint.objects.create(project=project, name="finisher", uri=str(tmp_path))
    Deployment.objects.create(project=project, checkpoint=checkpoint, backend="openai", served_name="finisher-authored",
                              active=True, activated_at=timezone.now())
    url = f"http://127.0.0.1:{site.server_address[1]}/index.html"
    task = services.task_create(project=project, actor=manager, env_kind="webapp", max_steps=3, definition={
        "task_id": "team-home", "start_url": url, "instruction": "Open the team app.",
        "check": {"type": "url_match", "url": url}})
    episode = Episode.objects.create(project=project, task=task, seed=0, mode="autonomous", created_by=manager)
    # The run's database session stays open, as the sessions of the e2e tests' Playwright pages do (Django's connection
    # is context-local); it is closed with the test database. Ending it here ended the connection a later e2e test of
    # this process was given (AdminShutdown in tests after this one).
    try:
        assert rollout_worker.run(episode.pk) == "finished"
    finally:
        rollout_worker.close_envs()
        site.shutdown()
        policy.shutdown()
    episode.refresh_from_db()
    assert (episode.status, episode.env_reward) == ("finished", 1.0), episode.end_reason
    assert Step.objects.get(episode=episode).url == url


NOTES_URL = "https://drive.usercontent.google.com/download?id=1notes&export=download"
DOWNLOADS = {"id": "notes-check", "instruction": "Say what the notes say.",
             "config": [{"type": "download", "parameters": {"files": [{"url": NOTES_URL,
                                                                       "path": "/home/user/Desktop/notes.txt"}]}}],
             "evaluator": {"func": "check_include_exclude",
                           "result": {"type": "vm_command_line", "command": "cat /home/user/Desktop/notes.txt"},
                           "expected": {"type": "rule", "rules": {"include": ["hello from the store"]}}}}


@pytest.mark.django_db(transaction=True)
def test_a_task_missing_a_file_imports_is_refused_at_start_naming_it_and_runs_once_it_is_uploaded(tmp_path, settings):
    from rollouts import worker as rollout_worker

    policy = start_policy_server(_Finisher)
    settings.LOUPE_OPENAI_BASE_URL = f"http://127.0.0.1:{policy.server_address[1]}"
    settings.MEDIA_ROOT = str(tmp_path / "media")
    project, manager, annotator = make_project(), make_user(), make_user()
    make_member(project, manager, "manager")
    make_member(project, annotator, "annotator")
    checkpoint = Checkpoint.objects.create(project=project, name="finisher", uri=str(tmp_path))
    Deployment.objects.create(project=project, checkpoint=checkpoint, backend="openai", served_name="finisher-files",
                              active=True, activated_at=timezone.now())
    client = client_for(manager)
    imported = client.post(tasks_url(project, "import"), {"format": "osworld", "tasks": [DOWNLOADS]}, format="json")
    assert imported.status_code == 201, imported.content  # a missing file does not stop the import
    task_id = imported.json()["results"][0]["id"]
    [listed] = client.get(tasks_url(project, "files")).json()["results"]
    assert (listed["task_name"], listed["missing"], listed["files"][0]["name"]) == ("notes-check", 1, "notes.txt")
    assert client_for(annotator).get(tasks_url(project, "files")).status_code == 403
    start = {"task": task_id, "seeds": [0], "mode": "autonomous"}
    refused = client.post(f"/api/v1/projects/{project.pk}/episodes/", start, format="json")
    assert refused.status_code == 409 and "does not hold: notes.txt" in refused.json()["detail"]
    assert not Episode.objects.filter(project=project).exists()
    no_url = client.post(tasks_url(project, "files"), {"file": SimpleUploadedFile("notes.txt", b"x")},
                         format="multipart")
    assert no_url.status_code == 400 and "url" in no_url.json()["errors"]
    uploaded = client.post(tasks_url(project, "files"), {"url": NOTES_URL, "file": SimpleUploadedFile(
        "notes.txt", b"hello from the store\n")}, format="multipart")
    assert uploaded.status_code == 201, uploaded.content
    assert client.get(tasks_url(project, "files")).json()["results"][0]["missing"] == 0
    started = client.post(f"/api/v1/projects/{project.pk}/episodes/", start, format="json")
    assert started.status_code == 201, started.content
    episode = Episode.objects.get(pk=started.json()["results"][0]["id"])
    try:
        assert rollout_worker.run(episode.pk) == "finished"
    finally:
        rollout_worker.close_envs()
        policy.shutdown()
    episode.refresh_from_db()
    assert (episode.status, episode.env_reward) == ("finished", 1.0), episode.end_reason  # the file reached the desktop
    removed = client.delete(tasks_url(project, f"files/{uploaded.json()['id']}"))
    assert removed.status_code == 204
    assert client.post(f"/api/v1/projects/{project.pk}/episodes/", start, format="json").status_code == 409


def test_the_command_checks_a_folder_of_osworld_files_per_domain(tmp_path, capsys):
    for domain, tasks in (("os", [OSWORLD, DOWNLOADS]), ("chrome", [{**CLOUD, "id": "bad-one"}])):
        (tmp_path / domain).mkdir()
        for task in tasks:
            (tmp_path / domain / f"{task['id']}.json").write_text(json.dumps(task))
    call_command("tasks_import", "--format", "osworld", "--check", "--problems", str(tmp_path))
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] in (["os"], ["chrome"],
                                                                                                ["total"])}
    assert rows["os"][1:] == ["2", "2/2", "100%", "1", "1", "1"]  # files, importable, runnable, need files, missing
    assert rows["chrome"][1:4] == ["1", "0/1", "0%"] and rows["total"][1] == "3"
    assert "unsupported getter 'vm_screen_size'" in out and "bad-one.json" in out
    assert not TaskSpec.objects.exists()  # a check imports nothing
