"""Think aloud through the real page: Chromium's fake microphone plays a sentence spoken by espeak-ng,
the page records it with MediaRecorder and uploads 2 s chunks, a real `audio` worker transcribes them
with faster-whisper, and the words come back over the episode's socket into the transcript panel,
on the step they were spoken in. A supervised episode is live the whole time (scripted policy, on
its own rollout worker), and one test drops the network mid-recording."""
import time

import pytest

from annotation.models import AudioChunk, AudioClip, TranscriptWord
from annotation.services import command_submit
from annotation.speech import word_error_rate
from training import deployments
from rollouts import episodes
from rollouts.models import Checkpoint, Episode
from tests.annotation.audio_fixtures import missing_tools, synthesize_wav
from tests.e2e.conftest import chromium_with_microphone, login, microphone_wav, screenshot
from tests.factories import PASSWORD, make_member, make_project, make_task, make_user
from tests.stack import stack_env, start_together, start_worker, wait_for, worker_quiet

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser,
              pytest.mark.skipif(bool(missing_tools()), reason=f"needs {missing_tools()}")]

SENTENCE = "The button I need is at the bottom of the page."
# The bound the server's own test of uploaded speech holds (tests/annotation/test_audio_api.py).
MAX_WER = 0.15


@pytest.fixture(scope="module")
def speech_wav(tmp_path_factory):
    """The sentence with a second of silence before it (the device opens before recording starts)
    and three after (so the speaker has clearly stopped), as 48 kHz mono PCM for Chromium."""
    folder = tmp_path_factory.mktemp("speech")
    spoken = synthesize_wav(SENTENCE, folder / "sentence.wav")
    return microphone_wav(spoken, folder / "think-aloud.wav", silence_after_s=3)


@pytest.fixture(scope="module")
def browser(speech_wav):
    """This module's own Chromium: the shared flags plus a fake microphone that plays the sentence once."""
    with chromium_with_microphone(speech_wav) as browser:
        yield browser


@pytest.fixture(scope="module")
def module_workers(module_stack):
    """A rollout worker (a supervised episode holds its process while it waits for the person) and an
    audio worker beside it, so transcription runs while the rollout does."""
    stack, path = module_stack
    env = stack_env()
    start_together(lambda: start_worker(stack, path, env, queues="live,rollouts,default", name="rollouts"),
                   lambda: start_worker(stack, path, env, queues="audio", name="audio"))


@pytest.fixture
def workers(transactional_db, module_workers):
    yield
    worker_quiet()


@pytest.fixture
def live_episode(tmp_path, workers):
    """A supervised episode on the scripted policy, started by its annotator and waiting on proposal 0."""
    from trainer.model import save_tiny_untrained

    project = make_project("Thinking aloud")
    user = make_user("thinker")
    make_member(project, user)
    task = make_task(project, "click-button", max_steps=10)
    save_tiny_untrained(tmp_path / "ckpt")
    checkpoint = Checkpoint.objects.create(project=project, name="scripted-solver", uri=str(tmp_path / "ckpt"))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test oracle")
    [episode] = episodes.episodes_start(project=project, task=task, seeds=[3], mode="supervised", actor=user)
    yield episode
    # A supervised episode waits for its person; end it so the rollout worker is free for the next test.
    episode.refresh_from_db()
    if episode.status not in ("finished", "failed", "interrupted"):
        command_submit(episode_id=episode.pk, user=user, frame={"type": "finish", "id": "teardown", "outcome": "failure"})
        wait_for(lambda: Episode.objects.get(pk=episode.pk).status == "finished", 60, what="the episode to end")


def open_session(page, base: str, episode: Episode, puts: list | None = None, log_in: bool = True) -> list[tuple[int, int]]:
    """(Log in,) open the live session, wait for the first proposal; returns the chunk PUTs seen (index, status)."""
    puts = [] if puts is None else puts

    def on_response(response):
        if response.request.method == "PUT" and "/chunks/" in response.url:
            puts.append((int(response.url.rsplit("/", 1)[1]), response.status))

    page.on("response", on_response)
    page.set_default_timeout(60_000)  # the machine is shared: a page may load slowly while the rollout starts
    if log_in:
        login(page, base, "thinker", PASSWORD)
        page.get_by_test_id("project-card").first.wait_for(timeout=60_000)
    page.goto(f"{base}/episodes/{episode.pk}")
    page.locator('[data-testid="proposal"][data-index="0"]').wait_for(timeout=90_000)
    page.get_by_test_id("mic-continuous").wait_for(timeout=10_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=mic-continuous]').disabled", timeout=10_000)
    return puts


def step_words(page, step: int) -> str:
    locator = page.locator(f'[data-testid="transcript-step"][data-step="{step}"] [data-testid="transcript-words"]')
    return locator.inner_text() if locator.count() else ""


def assert_stored_once_each(clip: AudioClip, puts: list[tuple[int, int]]) -> int:
    """Every chunk the page recorded is stored exactly once, with no index missing."""
    indices = list(AudioChunk.objects.filter(clip=clip).order_by("index").values_list("index", flat=True))
    assert indices == list(range(len(indices))), indices
    created = sorted(index for index, status in puts if status == 201)
    assert created == indices, puts  # each stored by exactly one PUT; a repeat would answer 200
    assert all(status in (200, 201) for _, status in puts), puts
    assert len({c.sha256 for c in AudioChunk.objects.filter(clip=clip)}) == len(indices)
    return len(indices)


def test_spoken_words_appear_in_the_transcript_on_the_step_they_were_said_in(daphne_server, page, live_episode):
    puts = open_session(page, daphne_server, live_episode)
    began = time.time()
    page.get_by_test_id("mic-continuous").click()
    page.get_by_test_id("recording-indicator").wait_for(timeout=10_000)
    page.wait_for_function("() => Number(document.querySelector('[data-testid=mic-level]').dataset.level) > 0.2",
                           timeout=10_000)  # the meter moves with the voice
    screenshot(page, "think-aloud-recording")
    page.wait_for_timeout(7_500)  # the sentence and the silence after it
    page.get_by_test_id("mic-continuous").click()
    page.get_by_test_id("recording-indicator").wait_for(state="detached", timeout=10_000)
    clip = wait_for(lambda: AudioClip.objects.filter(episode=live_episode, finished=True).first(), 30,
                    what="the last chunk and the finish call")
    page.get_by_test_id("upload-status").filter(has_text="All audio uploaded").wait_for(timeout=30_000)
    wait_for(lambda: step_words(page, 0).count(" ") >= 8, 120, interval=0.5, what="the words in the transcript panel")
    screenshot(page, "think-aloud-transcript")
    heard = step_words(page, 0)
    assert word_error_rate(SENTENCE, heard) <= MAX_WER, heard

    assert clip.content_type == "audio/webm;codecs=opus"
    assert abs(clip.started_at - began) < 3  # stamped on the session clock
    assert assert_stored_once_each(clip, puts) >= 4  # ~8 s in 2 s chunks

    page.get_by_test_id("cmd-approve").click()  # step 0 executes: the words stay on it, now for good
    wait_for(lambda: TranscriptWord.objects.filter(clip=clip, step__index=0).count() == TranscriptWord.objects.filter(
        clip=clip).count(), 60, what="the words attached to step 0")
    page.locator('[data-testid="transcript-step"][data-step="0"]').filter(has_text="click(").wait_for(timeout=30_000)
    assert page.errors == []


def test_chunks_recorded_while_offline_are_uploaded_once_the_network_returns(daphne_server, page, live_episode):
    puts = open_session(page, daphne_server, live_episode)
    status = page.get_by_test_id("upload-status")
    page.keyboard.down("m")  # push-to-talk: held through the whole drop
    page.locator('[data-testid="recording-indicator"][data-mode="push"]').wait_for(timeout=10_000)
    page.wait_for_function("() => document.querySelector('[data-testid=upload-status]').dataset.uploaded === '1'",
                           timeout=15_000)  # chunk 0 is on the server
    page.context.set_offline(True)  # offline for 4 one-second chunks, while the sentence is still being spoken
    page.wait_for_function("() => Number(document.querySelector('[data-testid=upload-status]').dataset.waiting) >= 4",
                           timeout=15_000)
    assert status.get_attribute("data-state") == "offline"
    assert "Offline" in status.inner_text() and "chunks waiting" in status.inner_text()
    screenshot(page, "think-aloud-offline")
    page.keyboard.up("m")  # released while still offline: the last chunk and the finish wait too
    page.get_by_test_id("recording-indicator").wait_for(state="detached", timeout=10_000)
    page.wait_for_timeout(2_000)
    page.context.set_offline(False)

    status.filter(has_text="All audio uploaded").wait_for(timeout=60_000)  # the chunks, then the finish
    clip = AudioClip.objects.get(episode=live_episode)
    wait_for(lambda: AudioClip.objects.get(pk=clip.pk).finished, 30, what="the finish call")
    assert assert_stored_once_each(clip, puts) >= 3
    wait_for(lambda: step_words(page, 0).count(" ") >= 8, 120, interval=0.5, what="the words in the transcript panel")
    assert word_error_rate(SENTENCE, step_words(page, 0)) <= MAX_WER, step_words(page, 0)
    screenshot(page, "think-aloud-after-offline")
    assert page.errors == []


def test_audio_recorded_in_a_tab_closed_while_offline_is_uploaded_when_the_session_is_opened_again(
        daphne_server, page, live_episode):
    puts = open_session(page, daphne_server, live_episode)
    status = page.get_by_test_id("upload-status")
    page.context.set_offline(True)
    page.keyboard.down("m")
    page.get_by_test_id("recording-indicator").wait_for(timeout=10_000)
    page.wait_for_function("() => Number(document.querySelector('[data-testid=upload-status]').dataset.waiting) >= 2",
                           timeout=15_000)
    page.wait_for_timeout(1_500)
    page.keyboard.up("m")
    page.get_by_test_id("recording-indicator").wait_for(state="detached", timeout=10_000)
    page.wait_for_function("() => document.querySelector('[data-testid=upload-status]').dataset.finishing === '1'",
                           timeout=10_000)  # the recorder handed over its last chunk, then the finish was queued
    assert status.get_attribute("data-state") == "offline"
    waiting = int(status.get_attribute("data-waiting"))
    assert waiting >= 3 and page.get_by_text("Keep this tab open").count() == 0  # kept in IndexedDB
    page.wait_for_timeout(500)
    page.close()  # the tab is closed before the network returns

    page.context.set_offline(False)
    again = page.context.new_page()
    open_session(again, daphne_server, live_episode, puts=puts, log_in=False)
    again.get_by_test_id("upload-status").filter(has_text=f"All audio uploaded ({waiting} chunks)").wait_for(
        timeout=60_000)
    clip = AudioClip.objects.get(episode=live_episode)
    wait_for(lambda: AudioClip.objects.get(pk=clip.pk).finished, 30, what="the finish call")
    assert assert_stored_once_each(clip, puts) == waiting
    wait_for(lambda: step_words(again, 0).count(" ") >= 8, 120, interval=0.5, what="the words in the transcript panel")
    assert word_error_rate(SENTENCE, step_words(again, 0)) <= MAX_WER, step_words(again, 0)
    screenshot(again, "think-aloud-reopened")


def test_a_30_second_network_drop_while_recording_and_acting_loses_nothing(daphne_server, page, live_episode):
    """The cable is out for 30 s while the person holds push-to-talk and approves the proposal: the socket
    drops (not only new requests, as with the browser's offline switch), the approval waits in the page, the
    chunks queue; back online, the approval is applied once, every chunk is stored once, the words arrive."""
    from annotation.models import Command
    from tests.netcut import CuttableProxy

    proxy = CuttableProxy(int(daphne_server.rsplit(":", 1)[1]))
    try:
        puts = open_session(page, proxy.url, live_episode)
        page.keyboard.down("m")
        page.locator('[data-testid="recording-indicator"][data-mode="push"]').wait_for(timeout=10_000)
        page.wait_for_function("() => document.querySelector('[data-testid=upload-status]').dataset.uploaded === '1'",
                               timeout=15_000)
        proxy.cut()
        page.context.set_offline(True)
        page.locator('[data-testid="connection-state"]:not([data-state="open"])').wait_for(timeout=15_000)
        page.get_by_test_id("cmd-approve").click()  # acting with the cable out: the page keeps the command
        page.wait_for_timeout(30_000)
        assert not Command.objects.filter(episode=live_episode, type="approve").exists()  # nothing got through
        waiting = int(page.get_by_test_id("upload-status").get_attribute("data-waiting") or 0)
        assert waiting >= 10, waiting  # ~30 s of speech in 2 s chunks, held in the page
        screenshot(page, "network-drop-30s")
        page.keyboard.up("m")
        page.get_by_test_id("recording-indicator").wait_for(state="detached", timeout=10_000)
        proxy.mend()
        page.context.set_offline(False)

        page.locator('[data-testid="connection-state"][data-state="open"]').wait_for(timeout=40_000)
        wait_for(lambda: Command.objects.filter(episode=live_episode, type="approve", status="applied").exists(), 60,
                 what="the approval sent while offline to be applied")
        # step 0 ran (the one click solves click-button) and the page, reconnected, shows it
        page.locator('[data-testid="transcript-step"][data-step="0"]').filter(has_text="click(").wait_for(timeout=60_000)
        # The finish call goes last, after every chunk. The episode may end meanwhile (one click solves the
        # task), which replaces the microphone panel: then no upload may be left waiting in the page.
        clip = wait_for(lambda: AudioClip.objects.filter(episode=live_episode, finished=True).first(), 120,
                        what="every chunk and the finish call")
        page.wait_for_function("() => { const s = document.querySelector('[data-testid=upload-status]');"
                               " return !s || s.textContent.includes('All audio uploaded'); }", timeout=30_000)
        assert page.get_by_test_id("pending-uploads").count() == 0
        assert Command.objects.filter(episode=live_episode, type="approve").count() == 1  # resent, stored once
        indices = list(AudioChunk.objects.filter(clip=clip).order_by("index").values_list("index", flat=True))
        assert indices == list(range(len(indices))) and len(indices) >= waiting + 1, (indices, waiting)
        # A chunk whose 201 was lost with the cable is sent again and answered 200: stored once either way.
        assert {index for index, status in puts if status in (200, 201)} == set(indices), puts
        assert all(status in (200, 201) for _, status in puts), puts
        wait_for(lambda: step_words(page, 0).count(" ") >= 8, 120, interval=0.5, what="the words in the transcript")
        assert word_error_rate(SENTENCE, step_words(page, 0)) <= MAX_WER, step_words(page, 0)
        screenshot(page, "network-drop-recovered")
        assert page.errors == []
    finally:
        proxy.close()
