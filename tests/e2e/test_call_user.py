"""The model asks the annotator (call_user); they answer in the page and the model reads the answer."""
import json

import pytest

from rollouts import episodes
from tests.annotation.asking import QUESTION, AskingModel, asking_stack  # noqa: F401
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD
from tests.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_annotator_answers_the_question_in_the_page(asking_stack, page):
    base, project, task, annotator = asking_stack
    episode_id = episodes.episodes_start(project=project, task=task, seeds=[5], mode="supervised", actor=annotator)[0].pk
    login(page, base, "asked", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=60_000)
    page.goto(f"{base}/episodes/{episode_id}")
    page.get_by_test_id("call-user").wait_for(timeout=120_000)
    assert QUESTION in page.get_by_test_id("call-user").inner_text()
    page.get_by_test_id("call-user-answer").fill("The green one.")
    screenshot(page, "session-call-user")
    page.get_by_test_id("call-user-send").click()
    wait_for(lambda: len(AskingModel.prompts) >= 2, 120, what="the model's next turn")
    assert "The user answered: The green one." in json.dumps(AskingModel.prompts[1])
    assert not page.errors
