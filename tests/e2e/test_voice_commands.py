"""Voice steering through the real page (issue 40): Chromium's fake microphone says "Pause.", "Reject, that is the
wrong button." and "Approve." (espeak-ng), with pauses between; the page records continuously with voice commands
on, a real audio worker transcribes the chunks, and each command comes back as a voice.command event. The page
shows it for a second: Escape cancels the pause (nothing is sent), the reject is sent with its reason and
acknowledged, then the approve. None of the three is a thought. A supervised episode on the scripted policy is live
the whole time."""
import wave

import numpy as np
import pytest

from annotation.models import Command, TranscriptWord
from annotation.services import command_submit
from training import deployments
from rollouts import episodes
from rollouts.models import Checkpoint, Episode
from tests.annotation.audio_fixtures import missing_tools, synthesize_wav
from tests.e2e.conftest import chromium_with_microphone, login, microphone_wav, screenshot
from tests.factories import PASSWORD, make_member, make_project, make_task, make_user
from tests.stack import stack_env, start_together, start_worker, wait_for, worker_quiet

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser,
              pytest.mark.skipif(bool(missing_tools()), reason=f"needs {missing_tools()}")]

SAID = ["Pause.", "Reject, that is the wrong button.", "Approve."]


@pytest.fixture(scope="module")
def commands_wav(tmp_path_factory):
    """A second of silence (the device opens before recording starts), then each command with 3.5 s of silence
    after it (a pause ends an utterance, and the page has time to show each), as 48 kHz mono PCM for Chromium."""
    folder = tmp_path_factory.mktemp("voice")
    parts, rate = [], 22050
    for i, text in enumerate(SAID):
        with wave.open(str(synthesize_wav(text, folder / f"{i}.wav")), "rb") as handle:
            rate = handle.getframerate()
            parts.append(np.frombuffer(handle.readframes(handle.getnframes()), dtype=np.int16))
        parts.append(np.zeros(int(3.5 * rate), dtype=np.int16))
    joined = folder / "joined.wav"
    with wave.open(str(joined), "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(rate)
        out.writeframes(np.concatenate(parts).tobytes())
    return microphone_wav(joined, folder / "commands.wav", silence_after_s=2)


@pytest.fixture(scope="module")
def browser(commands_wav):
    with chromium_with_microphone(commands_wav) as browser:
        yield browser


@pytest.fixture(scope="module")
def module_workers(module_stack):
    stack, path = module_stack
    env = stack_env()
    start_together(lambda: start_worker(stack, path, env, queues="live,rollouts,default", name="rollouts"),
                   lambda: start_worker(stack, path, env, queues="audio", name="audio"))


@pytest.fixture
def live_episode(tmp_path, transactional_db, module_workers):
    """A supervised episode on the scripted policy, started by its annotator and waiting on proposal 0."""
    from trainer.model import save_tiny_untrained

    project = make_project("Steering by voice")
    user = make_user("speaker")
    make_member(project, user)
    task = make_task(project, "click-button", max_steps=10)
    save_tiny_untrained(tmp_path / "ckpt")
    checkpoint = Checkpoint.objects.create(project=project, name="scripted-solver", uri=str(tmp_path / "ckpt"))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test oracle")
    [episode] = episodes.episodes_start(project=project, task=task, seeds=[3], mode="supervised", actor=user)
    yield episode
    episode.refresh_from_db()
    if episode.status not in ("finished", "failed", "interrupted"):
        command_submit(episode_id=episode.pk, user=user,
                       frame={"type": "finish", "id": "teardown", "outcome": "failure"})
        wait_for(lambda: Episode.objects.get(pk=episode.pk).status == "finished", 60, what="the episode to end")
    worker_quiet()


def voice(page, kind: str, state: str):
    return page.locator(f'[data-testid="voice-command"][data-type="{kind}"][data-state="{state}"]')


def test_spoken_commands_are_shown_cancelled_with_escape_or_sent_and_acknowledged(daphne_server, page, live_episode):
    page.set_default_timeout(60_000)
    login(page, daphne_server, "speaker", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=60_000)
    page.goto(f"{daphne_server}/episodes/{live_episode.pk}")
    page.locator('[data-testid="proposal"][data-index="0"]').wait_for(timeout=90_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=mic-continuous]').disabled", timeout=10_000)
    page.get_by_test_id("voice-commands-toggle").check()
    page.get_by_test_id("mic-continuous").click()
    page.get_by_test_id("recording-indicator").wait_for(timeout=10_000)

    voice(page, "pause", "pending").wait_for(timeout=90_000)  # "Pause.", shown for a second...
    screenshot(page, "voice-pending")
    page.keyboard.press("Escape")  # ...and cancelled
    voice(page, "pause", "cancelled").wait_for(timeout=5_000)
    assert "nothing was sent" in voice(page, "pause", "cancelled").get_by_test_id("voice-state").inner_text()

    voice(page, "reject", "acknowledged").wait_for(timeout=90_000)
    assert page.get_by_test_id("voice-reason").inner_text() == "that is the wrong button"
    screenshot(page, "voice-reject-acknowledged")
    reject = Command.objects.get(episode=live_episode, type="reject")
    assert reject.payload["reason"] == "that is the wrong button"

    voice(page, "approve", "acknowledged").wait_for(timeout=90_000)
    screenshot(page, "voice-approve-acknowledged")
    assert Command.objects.filter(episode=live_episode, type="approve").count() == 1
    assert not Command.objects.filter(episode=live_episode, type="pause").exists()  # the cancelled one

    page.get_by_test_id("episode-finished").wait_for(timeout=60_000)  # the approved click solved the task; the
    page.get_by_test_id("recording-indicator").wait_for(state="detached", timeout=10_000)  # recording ended with it
    screenshot(page, "voice-finished")
    said = " ".join(TranscriptWord.objects.filter(clip__episode=live_episode).values_list("word", flat=True)).lower()
    assert not any(word in said for word in ("pause", "reject", "approve", "button")), said  # commands, no thoughts
    assert page.errors == []
