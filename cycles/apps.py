from django.apps import AppConfig

from training.signals import run_stalled


class CyclesConfig(AppConfig):
    name = "cycles"

    def ready(self):
        # a cycle's training run is resumed by the cycle (under its lease), not by training's stalled-run sweep
        from cycles.models import Cycle

        def cycle_resumes(sender, *, run, **_) -> bool:
            return Cycle.objects.filter(run=run).exists()

        run_stalled.connect(cycle_resumes, weak=False, dispatch_uid="cycles.resume_own_run")
