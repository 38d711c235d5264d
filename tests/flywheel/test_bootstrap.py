import pytest

from flywheel.bootstrap import ensure_default_deployment
from flywheel.models import Deployment, TrainingRun
from tests.factories import make_project, make_task


@pytest.mark.django_db
def test_first_start_deploys_the_scripted_baseline_and_queues_the_cold_start(django_capture_on_commit_callbacks):
    project = make_project()
    make_task(project)
    empty = make_project()  # a project without tasks has nothing to roll out
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        ensure_default_deployment(log=lambda *_: None)
        ensure_default_deployment(log=lambda *_: None)  # a second start queues nothing new
    active = Deployment.objects.get(project=project, active=True)
    assert active.backend == "scripted" and active.checkpoint.name == "scripted-baseline"
    runs = TrainingRun.objects.filter(project=project, config__coldstart=True)
    assert runs.count() == 1 and runs.get().config["deploy_as"] == "v0"
    assert not Deployment.objects.filter(project=empty).exists()
    assert len(callbacks) == 1  # the run is enqueued once it commits
