"""Redaction where the data is first stored (issue 40, rollouts/privacy.py): a step recorded through step_record with
every kind of the test set on its screen, in its URL, typed text, thoughts and prompt is stored with none of
them, its screenshot black inside the matching elements' boxes; rejected proposals, review comments and outcome
comments likewise. Originals are kept only where the project says so, read by its admins only, each read
audited; a replay types a redacted step's original or refuses plainly; a branch's check compares like with like.
An unredacted export is refused to a manager and audited for an admin."""
import hashlib
import io
import json
import zipfile

import numpy as np
import pytest
from django.core.files.storage import default_storage
from PIL import Image
from rest_framework.test import APIClient

from agent.envs.base import Element, Observation
from agent.images import image_url
from agent.screen_match import screen_difference
from core.errors import ApplicationError
from core.models import AuditEntry
from rollouts import steps
from rollouts import episodes
from rollouts import privacy
from snapshots import build
from rollouts.models import Episode, Event, Rejection, Step
from projects.models import Project
from snapshots.models import SnapshotStatus
from tests.core.pii_set import NEAR_MISSES, SETTINGS, VALUES, screen_with

pytestmark = pytest.mark.django_db

ELEMENT_KINDS = ("email", "card", "national_id_uk", "national_id_es")  # one element a row, 40 px apart


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _project(demo, **policy) -> Project:
    project = demo["project"]
    settings = {**project.settings, "redaction": {**SETTINGS["redaction"], **policy}}
    Project.objects.filter(pk=project.pk).update(settings=settings)
    project.refresh_from_db()
    return project


def _record(project, task, *, index: int = 0, episode=None, prompt_images=(), **changes):
    """Step ``index`` of ``episode`` (a new one) through step_record: the test set on screen, in the URL, the typed
    text, the thoughts, the raw output and the prompt (its text and ``prompt_images`` besides the screen)."""
    v = {kind: value for kind, (value, _) in VALUES.items()}
    data, elements = screen_with([VALUES[kind][1] for kind in ELEMENT_KINDS])
    data, elements = changes.pop("screenshot", data), changes.pop("elements", elements)
    episode = episode or Episode.objects.create(project=project, task=task, seed=index, mode="supervised",
                                                status="running")
    typed = v["phone"]
    prompt_text = "\n".join(f'[text] "{e["text"]}"' for e in elements) + f"\nTask: mail {v['name']}"
    images = [*prompt_images, data]
    prompt = [{"role": "user", "content": [{"type": "text", "text": prompt_text},
                                           *({"type": "image_url", "image_url": {"url": image_url(i)}} for i in images)]}]
    fields = dict(
        episode=episode, index=index, screenshot=data, width=400, height=240,
        url=f"https://crm.example.com/?owner={v['email']}&from={v['ip']}", instruction=f"Write to {v['email']}",
        elements=elements, prompt=prompt, raw_output=f'Thought: {VALUES["secret"][1]}\nAction: type(text="{typed}")',
        token_ids=[1, 2, 3], token_logprobs=[-0.1, -0.2, -0.3], thought=VALUES["secret"][1],
        action={"name": "type", "args": {"text": typed}}, action_text=f'type(text="{typed}")', actor="human",
        proposal={"thought": VALUES["iban"][1], "action": None, "raw": VALUES["national_id"][1]}, reward=0.0,
        done=False, void_reason=None, info={"note": VALUES["customer_id"][1]}, timings={},
        screen_text=VALUES["national_id_it"][1], feedback=VALUES["secret_entropy"][1])
    fields.update(changes)
    return steps.step_record(**fields), data


def _stored_text(step: Step) -> str:
    return json.dumps({f.name: getattr(step, f.name) for f in Step._meta.fields if f.name not in ("episode", "id")},
                      default=str, ensure_ascii=False)


def _pixels(name: str) -> np.ndarray:
    with default_storage.open(name, "rb") as handle:
        return np.asarray(Image.open(handle).convert("L")).astype(int)


def test_a_step_is_stored_with_none_of_the_test_sets_values_and_black_inside_the_matching_boxes(demo):
    project = _project(demo)
    # a screen of its own (the last element is this test's), so that no other test stored its bytes
    data, elements = screen_with([*(VALUES[kind][1] for kind in ELEMENT_KINDS), "Stored once"])
    step, original = _record(project, demo["task"], screenshot=data, elements=elements)
    step.refresh_from_db()
    text = _stored_text(step) + Episode.objects.get(pk=step.episode_id).instruction
    for kind, (value, _) in VALUES.items():
        assert value not in text, kind
    assert "[EMAIL]" in step.url and step.action == {"name": "type", "args": {"text": "[PHONE]"}}
    assert step.elements[0]["text"] == "Send the invoice to [EMAIL] today" and step.elements[0]["width"] == 380
    assert step.token_ids == [] and step.token_logprobs == []  # they would spell the typed number
    pixels = _pixels(step.screenshot)
    for row in range(len(ELEMENT_KINDS)):  # each element's box is black, every pixel (JPEG noise aside)
        assert pixels[10 + row * 40:41 + row * 40, 10:391].max() < 24, ELEMENT_KINDS[row]
    assert pixels[170:201, 10:391].mean() > 150  # the element with nothing private keeps its grey
    assert pixels[210:, :].min() > 230  # and the page around is as it was
    image = step.prompt[0]["content"][-1]["image_url"]["url"]
    assert image == steps.IMAGE_REF + step.screenshot  # the prompt shows the redacted screen too
    assert not default_storage.exists(f"{privacy.ORIGINALS}/{step.episode_id}/0/step.json")  # nothing kept
    digest = hashlib.sha256(original).hexdigest()
    assert not default_storage.exists(f"screenshots/{digest[:2]}/{digest}.jpg")  # the original screen is nowhere


def test_a_later_prompt_shows_an_earlier_screen_redacted(demo):
    project = _project(demo)
    first, original = _record(project, demo["task"])
    second, _ = _record(project, demo["task"], index=1, episode=first.episode, prompt_images=[original])
    history = second.prompt[0]["content"][1]["image_url"]["url"]
    assert history == steps.IMAGE_REF + first.screenshot


def test_a_step_without_personal_data_is_stored_as_it_was(demo):
    project = _project(demo)
    data, elements = screen_with(["Nothing private here"])
    step, _ = _record(project, demo["task"], screenshot=data, elements=elements, url="https://example.com/",
                      instruction="Click it", thought="click the button", raw_output="Action: click(x=1, y=2)",
                      action={"name": "click", "args": {"x": 1, "y": 2}}, action_text="click(x=1, y=2)",
                      proposal=None, info={}, screen_text="", feedback="", prompt=[])
    assert step.screenshot == steps.screenshot_store(data) and step.token_ids == [1, 2, 3]
    assert step.thought == "click the button" and step.elements == elements


def test_a_policy_switched_off_stores_the_step_as_it_came(demo):
    project = _project(demo, enabled=False)
    step, original = _record(project, demo["task"])
    assert VALUES["phone"][0] in step.action_text and step.screenshot == steps.screenshot_store(original)


def test_a_rejected_proposal_is_stored_redacted(demo):
    project = _project(demo)
    episode = Episode.objects.create(project=project, task=demo["task"], seed=1, mode="supervised", status="running")
    rejection = steps.rejection_record(
        episode=episode, index=0, attempt=1, prompt=[{"role": "user", "content": VALUES["email"][1]}],
        raw_output=f'Action: type(text="{VALUES["card"][0]}")', token_ids=[4, 5], token_logprobs=[-1.0, -2.0],
        thought=VALUES["ip"][1], action={"name": "type", "args": {"text": VALUES["card"][0]}},
        action_text=f'type(text="{VALUES["card"][0]}")', void_reason=None, reason=f"not {VALUES['name'][0]}",
        repeated=False)
    rejection = Rejection.objects.get(pk=rejection.pk)
    stored = json.dumps([rejection.prompt, rejection.raw_output, rejection.thought, rejection.action,
                         rejection.action_text, rejection.reason])
    for kind in ("email", "card", "ip", "name"):
        assert VALUES[kind][0] not in stored, kind
    assert rejection.reason == "not [NAME]" and rejection.token_ids == []


def test_review_and_outcome_comments_are_stored_redacted(demo):
    from annotation.reviews import review_submit

    project = _project(demo)
    episode = Episode.objects.create(project=project, task=demo["task"], seed=2, mode="supervised", status="finished")
    review = review_submit(episode=episode, reviewer=demo["manager"], verdict="accept",
                           comment=f"Good, but it mailed {VALUES['email'][0]}")
    assert review.comment == "Good, but it mailed [EMAIL]"
    episodes.episode_outcome_set(episode_id=episode.pk, outcome="success", comment=VALUES["phone"][1])
    assert Episode.objects.get(pk=episode.pk).comment == "Call me back on [PHONE] after lunch"


def test_originals_are_kept_where_the_project_allows_and_only_its_admins_read_them_audited(demo):
    project = _project(demo, keep_originals=True)
    step, original = _record(project, demo["task"])
    url = f"/api/v1/episodes/{step.episode_id}/steps/0/original"
    for role in ("annotator", "manager"):
        response = client_for(demo[role]).post(url, {"reason": "curious"}, format="json")
        assert response.status_code == 403 and "Only an admin" in response.json()["detail"], role
    assert client_for(demo["outsider"]).post(url, {"reason": "x"}, format="json").status_code == 404
    refused = client_for(demo["admin"]).post(url, {}, format="json")
    assert refused.status_code == 400 and "Say why" in refused.json()["detail"]
    assert not AuditEntry.objects.filter(action="original.read").exists()
    body = client_for(demo["admin"]).post(url, {"reason": "customer asked for a copy"}, format="json").json()
    assert body["fields"]["action"] == {"name": "type", "args": {"text": VALUES["phone"][0]}}
    assert VALUES["email"][0] in body["fields"]["url"] and "token_ids" not in body["fields"]
    assert body["screenshot"] == image_url(original)
    entry = AuditEntry.objects.get(action="original.read")
    assert entry.actor == demo["admin"] and entry.data["reason"] == "customer asked for a copy"
    assert entry.project_id == project.pk and entry.data["step"] == 0


def test_a_replay_types_the_kept_original_and_refuses_without_one(demo):
    kept = _project(demo, keep_originals=True)
    step, _ = _record(kept, demo["task"])
    actions = privacy.replay_actions(project=kept, steps=[step])
    assert actions == [{"name": "type", "args": {"text": VALUES["phone"][0]}}]
    assert AuditEntry.objects.filter(action="original.read", data__reason="replay").count() == 1
    plain = _project(demo, keep_originals=False)
    other, _ = _record(plain, demo["task"], index=0,
                       episode=Episode.objects.create(project=plain, task=demo["task"], seed=9, mode="supervised",
                                                      status="running"))
    with pytest.raises(ApplicationError) as refused:
        privacy.replay_actions(project=plain, steps=[other])
    assert "step 1 typed personal data" in refused.value.message and "keeps no originals" in refused.value.message


def test_a_branch_check_finds_the_live_screen_the_same_as_its_redacted_stored_step(demo):
    project = _project(demo)
    step, original = _record(project, demo["task"])
    _, elements = screen_with([VALUES[kind][1] for kind in ELEMENT_KINDS])
    live = Observation(instruction="", url="", screenshot=original, width=400, height=240,
                       elements=[Element(**{k: e[k] for k in ("role", "text", "x", "y", "width", "height")})
                                 for e in elements])
    with default_storage.open(step.screenshot, "rb") as handle:
        stored = handle.read()
    assert screen_difference(expected_elements=step.elements, expected_screenshot=stored, observation=live)
    as_stored = privacy.observation_as_stored(settings=project.settings, observation=live)
    assert screen_difference(expected_elements=step.elements, expected_screenshot=stored,
                             observation=as_stored) is None


def _snapshot(project):
    snapshot = build.snapshot_create(project=project, kind="sft", build=False)
    snapshot = build.snapshot_build(snapshot_id=snapshot.pk)
    assert snapshot.status == SnapshotStatus.READY, snapshot.error
    return snapshot


def _finished(step):
    Episode.objects.filter(pk=step.episode_id).update(status="finished", outcome="success", env_reward=1.0)


def test_an_unredacted_export_is_refused_to_a_manager_and_audited_for_an_admin(demo):
    project = _project(demo, keep_originals=True)
    step, original = _record(project, demo["task"])
    _finished(step)
    snapshot = _snapshot(project)
    url = f"/api/v1/snapshots/{snapshot.pk}/export-unredacted"
    refused = client_for(demo["manager"]).post(url, {"reason": "training elsewhere"}, format="json")
    assert refused.status_code == 403 and "Only an admin of this project" in refused.json()["detail"]
    assert client_for(demo["admin"]).post(url, {}, format="json").status_code == 400
    assert not AuditEntry.objects.filter(action="snapshot.export_unredacted").exists()

    plain = zipfile.ZipFile(io.BytesIO(b"".join(client_for(demo["manager"]).get(
        f"/api/v1/snapshots/{snapshot.pk}/export").streaming_content)))
    plain_text = "\n".join(plain.read(n).decode(errors="replace") for n in plain.namelist() if n.endswith("json"))
    plain_text += plain.read("data.jsonl").decode()
    for kind, (value, _) in VALUES.items():
        assert value not in plain_text, kind
    assert not any(name.startswith("originals/") for name in plain.namelist())

    response = client_for(demo["admin"]).post(url, {"reason": "legal hold"}, format="json")
    assert response.status_code == 200
    bundle = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    line = json.loads(bundle.read("originals/steps.jsonl").decode().splitlines()[0])
    assert line["episode"] == step.episode_id and line["fields"]["action"]["args"]["text"] == VALUES["phone"][0]
    assert bundle.read(f"originals/{step.episode_id}-0.jpg") == original
    entry = AuditEntry.objects.get(action="snapshot.export_unredacted")
    assert entry.actor == demo["admin"] and entry.data == {"reason": "legal hold"}


def test_every_kind_on_a_screen_is_black_inside_its_box_and_the_near_misses_are_untouched(demo):
    """The whole test set on one screen, stored through step_record: each value's element box is black in the stored
    copy, each near-miss's keeps its grey, and the stored element texts hold no value and every near-miss as it
    was."""
    project = _project(demo)
    texts = [sentence for _, sentence in VALUES.values()] + NEAR_MISSES
    data, elements = screen_with(texts)
    step, _ = _record(project, demo["task"], screenshot=data, elements=elements, height=20 + 40 * len(texts))
    pixels = _pixels(step.screenshot)
    for row, text in enumerate(texts):
        box = pixels[10 + row * 40:41 + row * 40, 10:391]
        if row < len(VALUES):
            assert box.max() < 24, text
        else:
            assert box.mean() > 150 and box.min() < 60, text  # grey with its dark text: as it was
    stored = [e["text"] for e in step.elements]
    assert stored[len(VALUES):] == NEAR_MISSES
    for kind, (value, _) in VALUES.items():
        assert value not in json.dumps(stored), kind


def test_a_proposal_shown_live_as_it_came_is_kept_redacted_once_its_step_is_stored(demo):
    project = _project(demo)
    data, elements = screen_with([VALUES[kind][1] for kind in ELEMENT_KINDS])
    episode = Episode.objects.create(project=project, task=demo["task"], seed=5, mode="supervised", status="running")
    typed = {"name": "type", "args": {"text": VALUES["phone"][0]}}
    steps.proposal_open(episode=episode, index=0, screenshot=data, width=400, height=240,
                           url=f"https://crm.example.com/?owner={VALUES['email'][0]}",
                           turn={"thought": VALUES["secret"][1], "action": typed, "raw": "", "void_reason": None,
                                 "action_text": f'type(text="{VALUES["phone"][0]}")'})
    live = Event.objects.get(episode=episode, type="step.proposed")
    assert VALUES["phone"][0] in json.dumps(live.payload)  # the person deciding sees what the model would type
    step, _ = _record(project, demo["task"], episode=episode, screenshot=data, elements=elements)
    kept = Event.objects.get(pk=live.pk).payload
    for kind in ("phone", "email", "secret"):
        assert VALUES[kind][0] not in json.dumps(kept), kind
    assert kept["screenshot"] == step.screenshot and kept["index"] == 0
    served = client_for(demo["annotator"]).get(f"/api/v1/episodes/{episode.pk}/proposals/0/screenshot")
    assert b"".join(served.streaming_content) == default_storage.open(step.screenshot, "rb").read()


def test_a_polished_thought_a_person_edits_is_stored_redacted(demo):
    from annotation.polish import step_polish_edit

    project = _project(demo)
    step, _ = _record(project, demo["task"])
    Step.objects.filter(pk=step.pk).update(human_thought="click the first row")
    edited = step_polish_edit(step=step, user=demo["manager"], role="manager",
                              text=f"Mail {VALUES['email'][0]} the receipt")
    assert edited.polished_thought == "Mail [EMAIL] the receipt"
    assert VALUES["email"][0] not in json.dumps(AuditEntry.objects.get(action="step.polish_edit").data)


def test_a_persons_command_is_kept_redacted_once_applied_or_refused(demo):
    from annotation.commands import command_apply, command_refuse
    from annotation.models import Command, Intervention

    project = _project(demo)
    episode = Episode.objects.create(project=project, task=demo["task"], seed=6, mode="supervised", status="running")
    typed = {"name": "type", "args": {"text": VALUES["email"][0]}}
    act = Command.objects.create(episode=episode, client_id="c1", user=demo["annotator"], type="act",
                                 payload={"action": typed, "thought": f"mail {VALUES['email'][0]}"})
    intervention = command_apply(command=act, step_index=0, proposal={"thought": VALUES["phone"][1]},
                                 correction={"action": typed})
    stored = Command.objects.get(pk=act.pk)
    assert stored.status == "applied" and stored.payload["action"]["args"]["text"] == "[EMAIL]"
    kept = Intervention.objects.get(pk=intervention.pk)
    assert VALUES["phone"][0] not in json.dumps(kept.proposal) and "[EMAIL]" in json.dumps(kept.correction)
    assert act.payload["action"] == typed  # the worker applied it as it came
    reject = Command.objects.create(episode=episode, client_id="c2", user=demo["annotator"], type="reject",
                                    payload={"reason": f"call {VALUES['phone'][0]} instead"})
    command_refuse(command=reject, reason="nothing to reject")
    assert Command.objects.get(pk=reject.pk).payload == {"reason": "call [PHONE] instead"}


def test_a_branch_types_the_kept_original_and_finds_its_parents_redacted_screen_the_same(demo):
    from rollouts.worker import BranchReplay

    project = _project(demo, keep_originals=True)
    first, original = _record(project, demo["task"])
    _record(project, demo["task"], index=1, episode=first.episode)
    parent = Episode.objects.get(pk=first.episode_id)
    branch = Episode.objects.create(project=project, task=demo["task"], seed=parent.seed, mode="supervised",
                                    status="running", parent=parent, branched_at=1)
    replay = BranchReplay(Episode.objects.select_related("project").get(pk=branch.pk))
    assert replay.parent_steps[0].action == {"name": "type", "args": {"text": VALUES["phone"][0]}}
    _, elements = screen_with([VALUES[kind][1] for kind in ELEMENT_KINDS])
    live = Observation(instruction="", url="", screenshot=original, width=400, height=240,
                       elements=[Element(**{k: e[k] for k in ("role", "text", "x", "y", "width", "height")})
                                 for e in elements])
    assert replay.check(0, live) is None  # the live screen, redacted as it would be stored, is the parent's

    plain = _project(demo, keep_originals=False)  # a parent stored without originals: its typing cannot be replayed
    other, _ = _record(plain, demo["task"], episode=Episode.objects.create(
        project=plain, task=demo["task"], seed=7, mode="supervised", status="running"))
    _record(plain, demo["task"], index=1, episode=other.episode)
    blind = Episode.objects.create(project=plain, task=demo["task"], seed=7, mode="supervised", status="running",
                                   parent=other.episode, branched_at=1)
    with pytest.raises(ApplicationError, match="keeps no originals"):  # the worker ends the episode saying so
        BranchReplay(Episode.objects.select_related("project").get(pk=blind.pk))
