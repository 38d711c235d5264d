"""`manage.py flywheel_demo` against a running Loupe waits for the project's cold start (v0) when only the scripted
baseline is deployed, as on `make run`'s first start, showing its progress; it stops with the reason when there is
nothing to wait for (no cold start, or a failed one) or the wait runs out. People then correct v0's own steps."""
import threading
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from projects.models import Role
from rollouts.models import Checkpoint
from tests.factories import PASSWORD, make_member, make_project, make_task, make_tiny_checkpoint, make_user
from training import deployments
from training.models import RunStatus, TrainingRun

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def first_start(db):
    """A project as make run's first start leaves it: the scripted baseline deployed, the cold start queued."""
    project = make_project("Demo")
    make_task(project, "click-button", "train")
    make_task(project, "click-button", "eval")
    make_member(project, make_user("lead"), Role.MANAGER)
    baseline = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:")
    deployments.deployment_promote(project=project, checkpoint=baseline, backend="scripted", reason="baseline")
    cold = TrainingRun.objects.create(project=project, algorithm="sft", status=RunStatus.RUNNING, progress=0.4,
                                      config={"stages": [{"algorithm": "coldstart"}], "deploy_as": "v0"})
    return project, cold


def _demo(url: str, project, capsys, **options) -> str:
    call_command("flywheel_demo", url=url, project=project.slug, manager="lead", password=PASSWORD, cycles=0,
                 **options)
    return capsys.readouterr().out


def test_it_waits_for_the_cold_start_showing_its_progress_and_goes_on_with_v0(daphne_server, first_start, capsys,
                                                                               tmp_path):
    project, cold = first_start

    def cold_start_ends():
        time.sleep(2)
        v0 = make_tiny_checkpoint(project, tmp_path / "v0", name="v0")
        TrainingRun.objects.filter(pk=cold.pk).update(status=RunStatus.SUCCEEDED, progress=1.0, checkpoint=v0)

    ending = threading.Thread(target=cold_start_ends)
    ending.start()
    try:
        out = _demo(daphne_server, project, capsys, wait=60)
    finally:
        ending.join()
    assert f"waiting for v0, the cold start (run {cold.pk}): running, 40 %" in out
    assert "the deployed policy is v0." in out


def test_a_failed_cold_start_stops_it_with_the_runs_error(daphne_server, first_start, capsys):
    project, cold = first_start
    TrainingRun.objects.filter(pk=cold.pk).update(status=RunStatus.FAILED, error="trainer coldstart exited with -9")
    with pytest.raises(CommandError, match=rf"its cold start \(run {cold.pk}\) failed: trainer coldstart exited "
                                           r"with -9\. Starting Loupe again"):
        _demo(daphne_server, project, capsys, wait=60)


def test_no_cold_start_and_no_trained_policy_stops_it_at_once(daphne_server, first_start, capsys):
    project, cold = first_start
    cold.delete()
    started = time.monotonic()
    with pytest.raises(CommandError, match="no cold start is queued"):
        _demo(daphne_server, project, capsys, wait=60)
    assert time.monotonic() - started < 30


def test_a_wait_that_runs_out_says_how_far_the_cold_start_got(daphne_server, first_start, capsys):
    project, cold = first_start
    with pytest.raises(CommandError, match=r"after 2 s: its cold start \(run \d+\) is running at 40 %"):
        _demo(daphne_server, project, capsys, wait=2)
