"""A data manager reads, in the real replay page, what an annotator said during a step and the thought a real worker
polished from it, edits the thought, and the next snapshot's row carries the edit."""
import pytest

from annotation.models import AudioClip, TranscriptWord
from annotation import polish
from snapshots import build
from snapshots import export
from rollouts.models import PolishState, Step
from projects.models import Role
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user
from tests.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SPOKEN = "um okay so the the login link is uh at the top"


@pytest.fixture
def spoken_episode(celery_worker):
    project = make_project("Polishing")
    manager, annotator = make_user("polish-manager"), make_user("polish-annotator")
    make_member(project, manager, Role.MANAGER)
    make_member(project, annotator, Role.ANNOTATOR)
    episode = make_finished_episode(project, make_task(project), mode="supervised", reward=1.0, created_by=annotator,
                                    steps=[{"actor": "human", "thought": ""}, {}])
    step = episode.steps.get(index=0)
    clip = AudioClip.objects.create(episode=episode, user=annotator, client_id="e2e", content_type="audio/webm",
                                    started_at=1000.0, finished=True)
    TranscriptWord.objects.bulk_create([TranscriptWord(clip=clip, position=i, word=w, start=1000 + i / 3,
                                                       end=1000.2 + i / 3, step=step)
                                        for i, w in enumerate(SPOKEN.split())])
    polish.step_human_thought_set(step=step, text=SPOKEN)  # what annotation/audio.py calls: the worker polishes
    return {"project": project, "episode": episode, "step": step}


def test_manager_sees_the_spoken_words_polished_edits_the_thought_and_the_snapshot_row_uses_it(daphne_server, page,
                                                                                            spoken_episode):
    project, episode, step = spoken_episode["project"], spoken_episode["episode"], spoken_episode["step"]
    login(page, daphne_server, "polish-manager", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{episode.pk}")

    # the raw words, and the thought the default worker wrote from them (the page polls while it is queued)
    page.get_by_test_id("spoken-words").wait_for()
    assert page.get_by_test_id("spoken-words").inner_text() == f"“{SPOKEN}”"
    page.get_by_test_id("polished-text").wait_for(timeout=30_000)
    assert page.get_by_test_id("polished-text").inner_text() == "The login link is at the top."
    assert page.get_by_test_id("polish-state").text_content() == "written from the words"
    progress = page.get_by_test_id("polish-progress")
    progress.wait_for()
    assert "1 of 1 written" in progress.inner_text()
    screenshot(page, "polish-written")

    # the manager rewrites it; the arrow keys move the caret, not the replay
    page.get_by_test_id("polish-edit").click()
    box = page.get_by_test_id("polish-textarea")
    box.fill("The login link is at the top, so I click it.")
    box.press("ArrowLeft")
    assert page.get_by_test_id("replay-current").get_attribute("data-index") == "0"
    page.get_by_test_id("polish-save").click()
    page.locator('[data-testid="polish-state"]', has_text="edited by a person").wait_for()
    assert page.get_by_test_id("polished-text").inner_text() == "The login link is at the top, so I click it."
    assert page.get_by_test_id("spoken-words").inner_text() == f"“{SPOKEN}”"  # the raw words stay
    screenshot(page, "polish-edited")

    stored = Step.objects.get(pk=step.pk)
    assert (stored.polish_state, stored.polished_thought, stored.human_thought) == (
        PolishState.EDITED, "The login link is at the top, so I click it.", SPOKEN)
    snapshot = build.snapshot_create(project=project, kind="sft", build=False)
    rows = export.snapshot_preview(build.snapshot_build(snapshot_id=snapshot.pk), 10)
    first = next(r for r in rows if r["meta"]["step_index"] == 0)
    assert first["messages"][-1]["content"].startswith(
        "Thought: The login link is at the top, so I click it.\nAction: ")
    assert page.errors == []
