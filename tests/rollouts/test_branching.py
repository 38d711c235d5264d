"""Branching an episode from a step (issue 21, item 5): a real worker replays the parent's stored actions on the
same seed in the real Chromium, checking each screen against the parent's stored step, then acts anew."""
import time

import pytest
from django.core.files.storage import default_storage
from rest_framework.test import APIClient

from agent.screen_match import screenshot_difference
from rollouts.models import Checkpoint, Deployment, Episode, EpisodeStatus, Step
from projects.models import TaskSpec
from tests.factories import make_finished_episode, make_member, make_project, make_task, make_user
from tests.stack import wait_for

STEP_FIELDS = ("index", "action", "thought", "actor", "elements", "void", "instruction")


def steer(episode_id: int, user, kind: str, **fields) -> None:
    from annotation.services import command_submit

    result = command_submit(episode_id=episode_id, user=user,
                            frame={"type": kind, "id": f"{kind}-{time.monotonic_ns()}", **fields})
    assert result.ok, result.message


def proposal_at(episode_id: int, index: int) -> None:
    wait_for(lambda: Episode.objects.get(pk=episode_id).pending_index == index, 300, interval=0.1,
             what=f"the proposal at step {index}")


def run_parent(client, project, task, seed: int) -> Episode:
    """A supervised parent whose person ticks a checkbox: step 0 clicks the page's corner, step 1 the first
    checkbox (found in step 0's stored elements), step 2 the corner again, then the person ends it."""
    response = client.post(f"/api/v1/projects/{project.pk}/episodes/",
                           {"task": task.pk, "seeds": [seed], "mode": "supervised"}, format="json")
    assert response.status_code == 201, response.content
    episode_id = response.json()["results"][0]["id"]
    person = Episode.objects.get(pk=episode_id).created_by
    proposal_at(episode_id, 0)
    steer(episode_id, person, "edit", index=0, action="click(x=2, y=2)")
    proposal_at(episode_id, 1)
    box = next(e for e in Step.objects.get(episode_id=episode_id, index=0).elements if e["role"] == "checkbox")
    steer(episode_id, person, "edit", index=1, action=f"click(x={box['x']}, y={box['y']})")
    proposal_at(episode_id, 2)
    steer(episode_id, person, "edit", index=2, action="click(x=3, y=3)")
    proposal_at(episode_id, 3)
    steer(episode_id, person, "finish", outcome="failure")
    wait_for(lambda: Episode.objects.get(pk=episode_id).status in ("finished", "failed"), 120, what="the parent")
    return Episode.objects.get(pk=episode_id)


def branch(client, parent: Episode, step: int, mode: str = "autonomous"):
    return client.post(f"/api/v1/episodes/{parent.pk}/branch", {"step": step, "mode": mode}, format="json")


def snapshot(episode: Episode) -> list[tuple]:
    return list(Step.objects.filter(episode=episode).order_by("index").values_list(*STEP_FIELDS, "screenshot", "info"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.browser
def test_branch_replays_and_matches_the_parents_steps_then_acts_anew(celery_worker, rollout_project):
    project, task, checkpoint, client = rollout_project
    task.task_name, task.max_steps = "click-checkboxes", 4  # no single click ends it: the parent has several steps
    task.save(update_fields=["task_name", "max_steps"])
    parent = run_parent(client, project, task, 3)
    assert parent.status == EpisodeStatus.FINISHED and parent.n_steps == 3, (parent.end_reason, parent.n_steps)
    before = snapshot(parent)
    assert before[1][1]["name"] == "click" and before[2][4] != before[0][4]  # step 1 ticked a box: step 2's screen differs
    k = 2
    response = branch(client, parent, k)
    assert response.status_code == 201, response.content
    assert response.json()["branch_of"] == {"episode": parent.pk, "step": k}
    child_id = response.json()["id"]
    wait_for(lambda: Episode.objects.get(pk=child_id).status in ("finished", "failed"), 300, what="the branch")
    child = Episode.objects.get(pk=child_id)
    assert child.status == EpisodeStatus.FINISHED, child.end_reason
    assert (child.parent_id, child.branched_at, child.seed, child.task_id) == (parent.pk, k, parent.seed, task.pk)
    parent_steps = list(Step.objects.filter(episode=parent, index__lt=k).order_by("index"))
    child_steps = list(Step.objects.filter(episode=child).order_by("index"))
    assert len(child_steps) > k  # the replayed steps, then at least its own step k
    for theirs, ours in zip(parent_steps, child_steps):
        assert [getattr(ours, f) for f in STEP_FIELDS] == [getattr(theirs, f) for f in STEP_FIELDS]
        with default_storage.open(theirs.screenshot) as a, default_storage.open(ours.screenshot) as b:
            assert screenshot_difference(a.read(), b.read()) is None, ours.index
        assert ours.info["replayed_from"] == {"episode": parent.pk, "step": theirs.index}
        assert ours.checkpoint_id == theirs.checkpoint_id
    assert "replayed_from" not in child_steps[k].info
    # the model at k was asked exactly what it was asked in the parent: the same state, the same history
    assert child_steps[k].prompt == Step.objects.get(episode=parent, index=k).prompt
    assert snapshot(Episode.objects.get(pk=parent.pk)) == before  # nothing of the parent changed
    listed = client.get(f"/api/v1/episodes/{parent.pk}/branch").json()["results"]
    assert [row["id"] for row in listed] == [child.pk]

    # supervised: after the replay, the person is asked about step k itself (stored indices, void steps counted)
    response = branch(client, parent, k, mode="supervised")
    assert response.status_code == 201, response.content
    live_id = response.json()["id"]
    proposal_at(live_id, k)
    assert Step.objects.filter(episode_id=live_id).count() == k
    steer(live_id, child.created_by, "edit", index=k, action="click(x=5, y=5)")  # the alternative continuation
    proposal_at(live_id, k + 1)
    steer(live_id, child.created_by, "finish", outcome="failure")
    wait_for(lambda: Episode.objects.get(pk=live_id).status == EpisodeStatus.FINISHED, 120, what="the live branch")
    ours = Step.objects.get(episode_id=live_id, index=k)
    assert ours.actor == "edited" and ours.action != Step.objects.get(episode=parent, index=k).action
    assert ours.elements == Step.objects.get(episode=parent, index=k).elements  # the same state, a different action

    # a parent whose stored screen no longer matches what the replay sees: refused, naming the step
    # (step k's screen is always checked: the replay must arrive where the parent was when it acted there)
    at_k = Step.objects.get(episode=parent, index=k)
    tampered = [dict(e) for e in at_k.elements]
    tampered[0]["text"] = "tampered"
    Step.objects.filter(pk=at_k.pk).update(elements=tampered)
    diverging = branch(client, parent, k)
    assert diverging.status_code == 201, diverging.content
    wait_for(lambda: Episode.objects.get(pk=diverging.json()["id"]).status in ("finished", "failed"), 300,
             what="the diverging branch")
    failed = Episode.objects.get(pk=diverging.json()["id"])
    assert failed.status == EpisodeStatus.FAILED
    assert failed.end_reason.startswith(f"replay_diverged: the replay of episode {parent.pk} diverged at step {k + 1}: "
                                        "element 0"), failed.end_reason
    assert "'tampered'" in failed.end_reason
    assert failed.n_steps == Step.objects.filter(episode=failed).count() <= k  # only verified replays were stored
    assert Episode.objects.get(pk=parent.pk).n_steps == parent.n_steps


@pytest.mark.django_db
def test_branch_refusals():
    project = make_project()
    annotator, outsider = make_user(), make_user()
    make_member(project, annotator)
    task = make_task(project, "click-test")
    checkpoint = Checkpoint.objects.create(project=project, name="c", uri="/nowhere")
    Deployment.objects.create(project=project, checkpoint=checkpoint, active=True)  # a policy is deployed
    parent = make_finished_episode(project, task, steps=[{}, {}, {}], created_by=annotator)
    client = APIClient()
    client.force_authenticate(annotator)
    url = f"/api/v1/episodes/{parent.pk}/branch"

    for step in (3, -1):
        response = client.post(url, {"step": step, "mode": "supervised"}, format="json")
        assert response.status_code == 400, response.content
        assert f"Step {step} is not a step of episode {parent.pk}; choose one from 0 to 2." in response.json()["detail"]
    response = client.post(url, {"step": 1, "mode": "autonomous"}, format="json")
    assert response.status_code == 403 and "manager" in response.json()["detail"]
    response = client.post(url, {"step": 1, "mode": "sideways"}, format="json")
    assert response.status_code == 400

    Episode.objects.filter(pk=parent.pk).update(status=EpisodeStatus.RUNNING)
    response = client.post(url, {"step": 1}, format="json")
    assert response.status_code == 409 and "still running" in response.json()["detail"]
    Episode.objects.filter(pk=parent.pk).update(status=EpisodeStatus.FINISHED)

    TaskSpec.objects.filter(pk=task.pk).update(task_name="retired-task")
    response = client.post(url, {"step": 1}, format="json")
    assert response.status_code == 410
    assert "'retired-task'" in response.json()["detail"] and "no longer exists" in response.json()["detail"]
    TaskSpec.objects.filter(pk=task.pk).update(task_name="click-test")

    stranger = APIClient()
    stranger.force_authenticate(outsider)
    assert stranger.post(url, {"step": 1}, format="json").status_code == 404
    assert stranger.get(url).status_code == 404

    response = client.post(url, {"step": 1}, format="json")
    assert response.status_code == 201, response.content
    child = Episode.objects.get(pk=response.json()["id"])
    assert (child.parent_id, child.branched_at, child.mode, child.status) == (parent.pk, 1, "supervised", "queued")
    assert child.controller_id == annotator.pk


def test_screen_check_tolerates_jpeg_noise_but_not_a_changed_widget():
    """The thresholds of agent.screen_match on real rendering: the same MiniWoB-sized page re-encoded at another
    JPEG quality matches; the same page with one checkbox-sized square changed does not, and says how much."""
    import io

    from PIL import Image, ImageDraw

    from agent.screen_match import elements_difference

    page = Image.new("RGB", (160, 210), "white")
    draw = ImageDraw.Draw(page)
    draw.text((10, 60), "Select nothing and click Submit.", fill="black")
    draw.rectangle((10, 100, 70, 120), outline="black")

    def encoded(image, quality: int) -> bytes:
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=quality)
        return buffer.getvalue()

    assert encoded(page, 95) != encoded(page, 70)
    assert screenshot_difference(encoded(page, 95), encoded(page, 70)) is None
    ticked = page.copy()
    ImageDraw.Draw(ticked).rectangle((12, 150, 24, 162), fill="black")  # a 13 px box, like a ticked checkbox
    assert "of the screenshot's pixels differ" in screenshot_difference(encoded(page, 95), encoded(ticked, 95))
    assert "is 80x210" in screenshot_difference(encoded(page, 95), encoded(page.resize((80, 210)), 95))

    box = {"role": "checkbox", "text": "", "x": 20, "y": 150, "width": 13, "height": 13, "checked": False,
           "focused": False}
    assert elements_difference([box], [{**box, "x": 21}]) is None  # within POSITION_TOLERANCE
    assert elements_difference([box], [{**box, "checked": True}]) == (
        'element 0 (checkbox "") has checked True where the stored step had False')
    assert elements_difference([box], []) == "the screen has 0 elements where the stored step had 1"
