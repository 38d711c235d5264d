"""A data manager reviews in the real page: filter the list, open an episode, step through it with the
keyboard, grade and accept it; then freezes a snapshot that a real worker builds, and downloads it.
The replay follows the think-aloud audio; annotators can neither see nor use review and datasets."""
import datetime as dt
import io
import json
import zipfile

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from annotation.models import AudioChunk, AudioClip, Review, TranscriptWord
from snapshots.models import DatasetSnapshot
from projects.models import Role
from rollouts.models import Step
from tests.annotation.audio_fixtures import encode_webm_opus, missing_tools, synthesize_wav
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

EDITED = {"actor": "edited", "thought": "the OK button is lower", "action": {"name": "click", "args": {"x": 8, "y": 12}},
          "proposal": {"thought": "click cancel", "action": {"name": "click", "args": {"x": 2, "y": 2}},
                       "raw": "Thought: click cancel\nAction: click(x=2, y=2)"}}


@pytest.fixture
def review_project():
    project = make_project("Reviewing")
    manager, annotator = make_user("reviewer"), make_user("labeller")
    make_member(project, manager, Role.MANAGER)
    make_member(project, annotator, Role.ANNOTATOR)
    task = make_task(project, "click-button")
    plain = [make_finished_episode(project, task, steps=[{}, {}], reward=1.0) for _ in range(2)]
    edited = make_finished_episode(project, task, steps=[{}, EDITED, {"action": None}], mode="supervised", reward=1.0,
                                   created_by=annotator)
    return {"project": project, "manager": manager, "annotator": annotator, "edited": edited, "plain": plain}


def test_manager_filters_replays_grades_and_accepts_then_freezes_a_snapshot(daphne_server, celery_worker, page,
                                                                            review_project):
    project, edited = review_project["project"], review_project["edited"]
    login(page, daphne_server, "reviewer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review")
    rows = page.get_by_test_id("review-row")
    rows.first.wait_for()
    assert rows.count() == 3  # finished and unreviewed, by default

    page.get_by_test_id("review-filter-has_interventions").select_option("true")
    if page.get_by_test_id("review-apply").count():
        page.get_by_test_id("review-apply").click()
    page.wait_for_function("() => document.querySelectorAll('[data-testid=review-row]').length === 1")
    assert rows.first.get_attribute("data-episode-id") == str(edited.pk)
    assert "has_interventions=true" in page.url  # the view is a link
    screenshot(page, "review-list")

    rows.first.click()
    current = page.get_by_test_id("replay-current")
    current.wait_for()
    assert current.get_attribute("data-index") == "0"
    assert page.get_by_test_id("replay-step").count() == 3
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('[data-testid=replay-current]').dataset.index === '1'")
    proposal = page.get_by_test_id("replay-proposal")
    assert "click(x=2, y=2)" in proposal.inner_text()  # the model's proposal beside the correction
    page.get_by_test_id("step-label").select_option("good")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.querySelector('[data-testid=replay-current]').dataset.index === '2'")
    assert page.get_by_test_id("replay-void").is_visible()
    screenshot(page, "review-replay")

    page.get_by_test_id("verdict-accept").click()
    page.get_by_test_id("grade-4").click()
    page.get_by_test_id("review-comment").fill("good correction at step 1")
    # typing in the comment box must not move between steps
    page.get_by_test_id("review-comment").press("ArrowLeft")
    assert current.get_attribute("data-index") == "2"
    page.get_by_test_id("review-submit").click()
    page.get_by_test_id("review-saved").wait_for()
    assert "accepted" in page.get_by_test_id("review-status").inner_text().lower()
    review = Review.objects.get(episode=edited)
    assert (review.verdict, review.grade, review.comment) == ("accept", 4, "good correction at step 1")
    assert review.step_labels == {"1": "good"}
    screenshot(page, "review-saved")

    page.goto(f"{daphne_server}/projects/{project.pk}/datasets")
    page.get_by_test_id("bucket-sft").wait_for()
    assert "6" in page.get_by_test_id("bucket-sft").inner_text()  # 2 + 2 + 2 non-void steps, reward rule
    page.get_by_test_id("snapshot-kind").select_option("sft")
    page.get_by_test_id("snapshot-name").fill("first freeze")
    page.get_by_test_id("snapshot-create").click()
    ready = page.locator('[data-testid="snapshot-row"][data-status="ready"]')
    ready.first.wait_for(timeout=60_000)
    snapshot = DatasetSnapshot.objects.get(name="first freeze")
    assert ready.first.get_attribute("data-snapshot-id") == str(snapshot.pk) and snapshot.rows == 6
    # Frozen: nothing in the SFT bucket is new any more.
    page.wait_for_function(
        "() => document.querySelector('[data-testid=bucket-sft]').textContent.includes('nothing new')")
    screenshot(page, "datasets-snapshot")
    # Freezing the same rows again makes no second copy and says which snapshot holds them.
    page.get_by_test_id("snapshot-only-new").uncheck()
    page.get_by_test_id("snapshot-create").click()
    page.wait_for_function("() => document.querySelector('[data-testid=snapshot-freeze-result]')?.textContent"
                           ".includes('Already frozen as snapshot #')")
    assert f"#{snapshot.pk}" in page.get_by_test_id("snapshot-freeze-result").inner_text()
    assert DatasetSnapshot.objects.filter(project=project).count() == 1

    href = ready.first.get_by_test_id("snapshot-download").get_attribute("href")
    download = page.request.get(daphne_server + href)
    assert download.status == 200
    names = zipfile.ZipFile(io.BytesIO(download.body())).namelist()
    assert {"data.jsonl", "data.parquet", "lineage.jsonl", "snapshot.json"} <= set(names)

    # The step label given above makes a process-reward (PRM) row: its step, labelled good.
    assert "1 rows" in page.get_by_test_id("bucket-prm").inner_text()
    page.get_by_test_id("snapshot-kind").select_option("prm")
    page.get_by_test_id("snapshot-create").click()
    page.wait_for_function(
        "() => document.querySelectorAll('[data-testid=snapshot-row][data-status=ready]').length === 2", timeout=60_000)
    prm = DatasetSnapshot.objects.get(project=project, kind="prm")
    row = page.locator(f'[data-testid="snapshot-row"][data-snapshot-id="{prm.pk}"]')
    assert "process reward model" in row.get_by_test_id("snapshot-prm-note").inner_text()
    assert row.get_by_test_id("snapshot-train").count() == 0
    bundle = zipfile.ZipFile(io.BytesIO(page.request.get(daphne_server + row.get_by_test_id("snapshot-download")
                                                         .get_attribute("href")).body()))
    [prm_row] = [json.loads(line) for line in bundle.read("data.jsonl").splitlines()]
    assert (prm_row["labels"], prm_row["meta"]["episode_id"], prm_row["meta"]["step_index"]) == ([True], edited.pk, 1)
    assert prm_row["completions"] == ["Thought: the OK button is lower\nAction: click(x=8, y=12)"]
    screenshot(page, "datasets-prm")
    assert page.errors == []


def test_annotator_sees_that_datasets_are_for_managers(daphne_server, page, review_project):
    login(page, daphne_server, "labeller", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{review_project['project'].pk}/datasets")
    page.get_by_text("Only managers").first.wait_for()
    assert page.get_by_test_id("snapshot-create").count() == 0
    screenshot(page, "datasets-annotator")


def test_annotator_can_neither_see_nor_use_the_review_page(daphne_server, page, review_project):
    project, edited = review_project["project"], review_project["edited"]
    login(page, daphne_server, "labeller", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}")
    nav = page.get_by_role("navigation", name="Project sections")
    nav.get_by_text("Runs").wait_for()
    assert "Review" not in nav.inner_text() and "Datasets" not in nav.inner_text()
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{edited.pk}")
    page.get_by_text("Only managers").first.wait_for()
    assert page.get_by_test_id("review-submit").count() == 0 and page.get_by_test_id("replay-current").count() == 0
    screenshot(page, "review-annotator")
    # Nor around the page: the API refuses the review itself.
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    refused = page.request.put(f"{daphne_server}/api/v1/episodes/{edited.pk}/review",
                               data=json.dumps({"verdict": "accept"}),
                               headers={"Content-Type": "application/json", "X-CSRFToken": token})
    assert refused.status == 403 and "manager" in refused.json()["detail"]
    assert not Review.objects.filter(episode=edited).exists()
    assert page.errors == []


SPOKEN = "The agent opened the settings page, but it clicked the wrong button at the top."


@pytest.mark.skipif(bool(missing_tools()), reason=f"needs {missing_tools()}")
def test_replay_follows_the_think_aloud_audio(daphne_server, page, review_project, tmp_path):
    project, annotator = review_project["project"], review_project["annotator"]
    episode = make_finished_episode(project, make_task(project, "click-link"), steps=[{}, EDITED, {}],
                                    mode="supervised", created_by=annotator)
    # The session clock: the clip's audio starts at t0; steps end (are stored) 2, 4 and 6 s in.
    t0 = 1_800_000_000.0
    for index in range(3):
        Step.objects.filter(episode=episode, index=index).update(
            created_at=dt.datetime.fromtimestamp(t0 + 2 * (index + 1), tz=dt.timezone.utc))
    audio = encode_webm_opus(synthesize_wav(SPOKEN, tmp_path / "spoken.wav"))
    clip = AudioClip.objects.create(episode=episode, user=annotator, client_id="c1", content_type="audio/webm",
                                    started_at=t0, finished=True, transcribed_chunks=1)
    name = default_storage.save("audio/test-replay.bin", ContentFile(audio))
    AudioChunk.objects.create(clip=clip, index=0, start_time=t0, file=name, size=len(audio), sha256="0" * 64)
    steps = {s.index: s for s in episode.steps.all()}
    for position, (word, start, index) in enumerate([("agent", 0.5, 0), ("settings", 2.5, 1), ("wrong", 4.5, 2)]):
        TranscriptWord.objects.create(clip=clip, position=position, word=word, start=t0 + start, end=t0 + start + 0.4,
                                      step=steps[index])

    login(page, daphne_server, "reviewer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{episode.pk}")
    page.get_by_test_id("replay-current").wait_for()
    player = page.get_by_test_id("replay-audio")
    page.wait_for_function("() => document.querySelector('[data-testid=replay-audio]')?.readyState >= 1",
                           timeout=20_000)
    assert player.evaluate("a => a.duration") > 5  # the real recording, served by the API

    def at_audio_time(seconds: float) -> None:
        player.evaluate("(a, t) => { a.currentTime = t; }", seconds)

    at_audio_time(4.6)
    page.wait_for_function("() => document.querySelector('[data-testid=replay-current]').dataset.index === '2'")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=transcript-word][data-active]')?.textContent.trim() === 'wrong'")
    at_audio_time(2.6)
    page.wait_for_function("() => document.querySelector('[data-testid=replay-current]').dataset.index === '1'")
    screenshot(page, "review-replay-audio")
    # Playing moves on by itself.
    player.evaluate("a => { a.muted = true; return a.play(); }")
    page.wait_for_function("() => document.querySelector('[data-testid=replay-current]').dataset.index === '2'",
                           timeout=10_000)
    player.evaluate("a => a.pause()")
    # A click on a word takes the audio (and the step) back to it.
    page.get_by_test_id("transcript-word").first.click()
    page.wait_for_function("() => document.querySelector('[data-testid=replay-current]').dataset.index === '0'")
    assert abs(player.evaluate("a => a.currentTime") - 0.5) < 0.3
    assert page.errors == []
