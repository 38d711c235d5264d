"""What people read, in the real page: step numbers count from 1 in the live view as in the replay, an end
reason is plain words, and a think-aloud recording shows its real length (Chromium says `Infinity` for a
recorder's WebM, which carries no duration)."""
import re
import wave

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from annotation.models import AudioChunk, AudioClip, TranscriptWord
from projects.models import Role
from tests.annotation.audio_fixtures import encode_webm_opus, missing_tools, synthesize_wav
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SPOKEN = "The agent opened the settings page. It clicked the wrong button. Now it looks right."


@pytest.fixture
def project():
    project = make_project("Wording")
    project.reviewer = make_user("reviewer")
    make_member(project, project.reviewer, Role.MANAGER)
    return project


def test_the_live_view_and_the_replay_number_steps_alike_and_say_why_the_episode_ended(daphne_server, page,
                                                                                        project):
    episode = make_finished_episode(project, make_task(project), steps=[{}, {}])  # ended "done", as the rollout does
    login(page, daphne_server, "reviewer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)

    page.goto(f"{daphne_server}/episodes/{episode.pk}")
    reason = page.get_by_test_id("finished-reason")
    reason.wait_for(timeout=20_000)
    assert reason.inner_text() == "The task ended (the page reported it done)."
    assert page.get_by_role("heading", name="Latest step (2)").count() == 1  # the last of two steps
    screenshot(page, "wording-session-ended")

    page.goto(f"{daphne_server}/projects/{project.pk}/review/{episode.pk}")
    current = page.get_by_test_id("replay-current")
    current.wait_for(timeout=20_000)
    assert current.get_attribute("data-index") == "0" and "Step 1 of 2" in current.inner_text()
    assert page.get_by_test_id("end-reason").inner_text() == "The task ended (the page reported it done)."
    assert page.errors == []


@pytest.mark.skipif(bool(missing_tools()), reason=f"needs {missing_tools()}")
def test_a_recording_without_a_duration_shows_its_real_length(daphne_server, page, project, tmp_path):
    episode = make_finished_episode(project, make_task(project), steps=[{}, {}, {}], mode="supervised")
    t0 = 1_800_000_000.0
    wav = synthesize_wav(SPOKEN, tmp_path / "spoken.wav")
    with wave.open(str(wav)) as spoken:
        seconds = spoken.getnframes() / spoken.getframerate()
    audio = encode_webm_opus(wav)  # live-style, as MediaRecorder writes it: no duration, no cues
    clip = AudioClip.objects.create(episode=episode, user=project.reviewer, client_id="c1",
                                    content_type="audio/webm", started_at=t0, finished=True, transcribed_chunks=1)
    name = default_storage.save("audio/test-wording.bin", ContentFile(audio))
    AudioChunk.objects.create(clip=clip, index=0, start_time=t0, file=name, size=len(audio), sha256="0" * 64)
    step = episode.steps.get(index=0)
    TranscriptWord.objects.create(clip=clip, position=0, word="agent", start=t0 + 0.5, end=t0 + 0.9, step=step)

    login(page, daphne_server, "reviewer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{episode.pk}")
    page.get_by_test_id("replay-current").wait_for(timeout=20_000)
    length = page.locator("[data-testid=clip-duration][data-known=true]")
    length.wait_for(timeout=20_000)
    shown = length.inner_text()
    player = page.get_by_test_id("replay-audio")
    screenshot(page, "wording-replay-audio-length")
    assert re.fullmatch(r"\d+:\d\d", shown), shown
    minutes, secs = shown.split(":")
    assert abs(int(minutes) * 60 + int(secs) - seconds) <= 1, (shown, seconds)  # the recording's real length
    assert "Infinity" not in page.inner_text("body") and "NaN" not in page.inner_text("body")
    # Finding the length left the person's player and the step view where they were.
    assert player.evaluate("a => a.currentTime") == 0
    assert page.get_by_test_id("replay-current").get_attribute("data-index") == "0"
    assert page.errors == []
