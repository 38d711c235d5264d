"""A checkpoint's action format and screenshot reading (issue 19): registered, inherited, shown and checked; the
project's history_images; how the rollout worker prompts a checkpoint; a step's prompt stored with its screenshots
as references to the stored files and turned back into exactly what was sent."""
from __future__ import annotations

import json

import numpy as np
import pytest
from django.core.files.storage import default_storage
from rest_framework.test import APIClient
from safetensors.numpy import save_file

from agent.policies import PolicyError
from agent.images import image_bytes, image_url
from agent.prompt import render_messages
from core.errors import ApplicationError
from cycles import cycle_settings
from training import deployments
from rollouts import steps
from rollouts.models import Episode, Rejection
from rollouts.worker import policy_for, prompting_for
from tests.factories import jpeg, make_member, make_project, make_task, make_user

pytestmark = pytest.mark.django_db


def checkpoint_dir(path, *, vision: bool = False, loupe: dict | None = None) -> str:
    """The least a checkpoint dir needs to be registered: config.json (with a vision part: a VLM) and weights."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"vision_config": {"depth": 2}} if vision else {}))
    save_file({"w": np.zeros(2, dtype=np.float32)}, str(path / "model.safetensors"))
    if loupe is not None:
        (path / "loupe.json").write_text(json.dumps(loupe))
    return str(path)


def register(project, name: str, uri: str, **kw):
    return deployments.checkpoint_register(project=project, name=name, uri=uri, **kw)


@pytest.fixture
def project():
    return make_project()


def test_a_checkpoint_takes_its_format_from_what_it_is_told_its_parent_or_its_loupe_json(project, tmp_path):
    vlm = register(project, "ui-tars", checkpoint_dir(tmp_path / "a", vision=True), action_format="uitars")
    assert (vlm.action_format, vlm.reads_images) == ("uitars", True)  # a vision model reads screenshots by default
    # how training registers its checkpoints: no format given
    child = register(project, "run-1", checkpoint_dir(tmp_path / "b", vision=True), parent=vlm)
    assert (child.action_format, child.reads_images) == ("uitars", True)
    trained = register(project, "trained",
                       checkpoint_dir(tmp_path / "c", loupe={"action_format": "pyautogui", "reads_images": False}))
    assert (trained.action_format, trained.reads_images) == ("pyautogui", False)
    text = register(project, "tiny", checkpoint_dir(tmp_path / "d"))
    assert (text.action_format, text.reads_images) == ("loupe", False)
    blind = register(project, "blind", checkpoint_dir(tmp_path / "e", vision=True), reads_images=False)
    assert blind.reads_images is False


def test_an_unknown_format_or_a_text_model_that_reads_screenshots_is_refused(project, tmp_path):
    with pytest.raises(ApplicationError, match="Unknown action format 'tars'; use one of loupe, uitars"):
        register(project, "x", checkpoint_dir(tmp_path / "a"), action_format="tars")
    with pytest.raises(ApplicationError, match="no vision_config.*cannot read screenshots"):
        register(project, "y", checkpoint_dir(tmp_path / "b"), reads_images=True)
    assert not project.checkpoints.exists()


def test_the_api_registers_and_shows_a_checkpoints_format_with_plain_errors(project, tmp_path):
    admin, annotator = make_user(), make_user()
    make_member(project, admin, "admin")
    make_member(project, annotator, "annotator")
    client = APIClient()
    client.force_authenticate(admin)
    url = f"/api/v1/projects/{project.pk}/checkpoints/"
    uri = checkpoint_dir(tmp_path / "vlm", vision=True)

    bad = client.post(url, {"name": "v", "uri": uri, "action_format": "tars"}, format="json")
    assert bad.status_code == 400
    assert bad.json()["detail"] == 'action_format: Unknown action format "tars"; use one of loupe, uitars, ' \
                                   'qwen3-relative, qwen25-absolute, pyautogui, qwen-relative.'
    blind = client.post(url, {"name": "t", "uri": checkpoint_dir(tmp_path / "text"), "reads_images": True},
                        format="json")
    assert blind.status_code == 400 and "cannot read screenshots" in blind.json()["detail"]

    for where, message in (("relative/dir", "uri: give the checkpoint directory's absolute path"),
                           ("/" + "a" * 300, "cannot be read: OSError"), (str(tmp_path / "none"), "does not exist")):
        refused = client.post(url, {"name": "w", "uri": where}, format="json")
        assert refused.status_code in (400, 409) and message in refused.json()["detail"], refused.content
    made = client.post(url, {"name": "ui-tars", "uri": uri, "action_format": "uitars"}, format="json")
    assert made.status_code == 201, made.content
    assert (made.json()["action_format"], made.json()["reads_images"]) == ("uitars", True)
    again = client.post(url, {"name": "ui-tars", "uri": uri}, format="json")
    assert again.status_code == 409 and "already exists" in again.json()["detail"]

    reader = APIClient()
    reader.force_authenticate(annotator)
    listed = reader.get(url)
    assert listed.status_code == 200
    [shown] = listed.json()["results"]
    assert (shown["name"], shown["action_format"], shown["reads_images"]) == ("ui-tars", "uitars", True)
    assert reader.post(url, {"name": "z", "uri": uri}, format="json").status_code == 403  # admins register


def test_history_images_is_a_project_setting_from_0_to_10(project):
    manager = make_user()
    make_member(project, manager, "manager")
    assert cycle_settings.settings_of(project)["history_images"] == 0
    assert cycle_settings.settings_set(project=project, actor=manager, history_images=5)["history_images"] == 5
    for bad in (-1, 11, 2.5, True, "5"):
        with pytest.raises(ApplicationError, match="history_images: use a whole number of earlier screenshots from 0 "
                                                   "to 10"):
            cycle_settings.settings_set(project=project, actor=manager, history_images=bad)
    client = APIClient()
    client.force_authenticate(manager)
    refused = client.patch(f"/api/v1/projects/{project.pk}/cycle-settings", {"history_images": 12}, format="json")
    assert refused.status_code == 400 and refused.json()["detail"].startswith("history_images: use a whole number")
    changed = client.patch(f"/api/v1/projects/{project.pk}/cycle-settings", {"history_images": 3}, format="json")
    assert changed.status_code == 200 and changed.json()["history_images"] == 3


def test_the_worker_prompts_a_checkpoint_as_it_reads_and_answers(project, tmp_path, settings):
    task = make_task(project)
    manager = make_user()
    cycle_settings.settings_set(project=project, actor=manager, history_images=4)
    vlm = register(project, "ui-tars", checkpoint_dir(tmp_path / "v", vision=True), action_format="uitars")
    # registered by its old name, recorded by the format's name now (issue 36)
    text = register(project, "qwen-text", checkpoint_dir(tmp_path / "t"), action_format="qwen-relative")
    on_vlm = Episode.objects.create(project=project, task=task, seed=1, checkpoint=vlm)
    on_text = Episode.objects.create(project=project, task=task, seed=2, checkpoint=text)

    deployments.deployment_promote(project=project, checkpoint=vlm, backend="openai", served_name="ui-tars")
    assert prompting_for(on_vlm) == {"action_format": "uitars", "with_image": True, "history_images": 4,
                                     "pixels": {"min_pixels": None, "max_pixels": None}}
    policy = policy_for(on_vlm)
    assert (policy.name, policy.model, policy.max_tokens) == ("openai", "ui-tars", 384)  # room for UI-TARS's plan
    assert prompting_for(on_text) == {"action_format": "qwen3-relative", "with_image": False, "history_images": 0,
                                      "pixels": {"min_pixels": None, "max_pixels": None}}

    deployments.deployment_promote(project=project, checkpoint=vlm, backend="scripted")
    assert prompting_for(on_vlm) == {"action_format": "loupe", "with_image": False, "history_images": 0,
                                     "pixels": {}}
    deployments.deployment_promote(project=project, checkpoint=vlm, backend="local")
    with pytest.raises(PolicyError, match="reads screenshots; the local backend runs text models only"):
        policy_for(on_vlm)


def test_a_stored_prompt_holds_references_to_the_step_screenshots_and_turns_back_into_what_was_sent(project):
    episode = Episode.objects.create(project=project, task=make_task(project), seed=3, status="running")
    before, now = jpeg(1), jpeg(2)
    sent = render_messages(instruction="Do X.", observation_text="screen 2",
                           history=[("screen 1", "Thought: t\nAction: wait()", 16, 16)], images=[before, now],
                           action_format="uitars")
    common = dict(episode=episode, width=16, height=16, url="", instruction="Do X.", elements=[], raw_output="garbage",
                  token_ids=[], token_logprobs=[], thought="", action=None, action_text="", actor="model",
                  proposal=None, reward=0.0, done=False, void_reason="no 'Action:' line found", info={}, timings={})
    first = steps.step_record(index=0, screenshot=before, prompt=[], action_format="uitars", **common)
    step = steps.step_record(index=1, screenshot=now, prompt=sent, action_format="uitars", **common)

    urls = [part["image_url"]["url"] for m in step.prompt if isinstance(m["content"], list) for part in m["content"]
            if part["type"] == "image_url"]
    assert urls == [f"loupe-storage:{first.screenshot}", f"loupe-storage:{step.screenshot}"]  # the steps' own files
    assert len(json.dumps(step.prompt)) < len(json.dumps(sent))
    assert steps.prompt_as_sent(step.prompt) == sent
    with default_storage.open(step.screenshot) as handle:
        assert handle.read() == now == image_bytes(image_url(now))
    assert step.action_format == "uitars" and steps.step_payload(step)["action_format"] == "uitars"

    rejection = steps.rejection_record(episode=episode, index=2, attempt=1, prompt=sent, raw_output="x",
                                          token_ids=[], token_logprobs=[], thought="", action=None, action_text="",
                                          void_reason="v", reason="no", repeated=False, action_format="uitars")
    stored = Rejection.objects.get(pk=rejection.pk)
    assert stored.action_format == "uitars" and steps.prompt_as_sent(stored.prompt) == sent
    with pytest.raises(ApplicationError, match="Unknown action format 'tars'"):
        steps.step_record(index=3, screenshot=now, prompt=[], action_format="tars", **common)
    default_storage.delete(first.screenshot)
    with pytest.raises(ApplicationError, match=f"The screenshot {first.screenshot} of a stored prompt is missing"):
        steps.prompt_as_sent(step.prompt)


def test_the_workers_local_policy_answers_with_the_configured_torch_threads(project, tmp_path, settings):
    """Workers run several local policies at once, one a process: each gets LOUPE_POLICY_THREADS torch threads (two
    policies of a thread a core on 2 cores answered 40 times slower than with one each)."""
    import torch

    from rollouts import worker as rollout_worker
    from tests.factories import make_tiny_checkpoint

    checkpoint = make_tiny_checkpoint(project, tmp_path / "tiny")
    episode = Episode.objects.create(project=project, task=make_task(project), seed=1, checkpoint=checkpoint)
    before = torch.get_num_threads()
    rollout_worker._policies.clear()
    try:
        settings.LOUPE_POLICY_THREADS = 3  # not what the test process has (make test runs one thread)
        policy = policy_for(episode)
        assert policy.checkpoint_dir == tmp_path / "tiny" and torch.get_num_threads() == 3
    finally:
        rollout_worker._policies.clear()
        torch.set_num_threads(before)
