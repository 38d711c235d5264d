from django.apps import AppConfig

from rollouts.signals import episode_finished


class SnapshotsConfig(AppConfig):
    name = "snapshots"

    def ready(self):
        # a finished episode's rows are rendered ahead of the next freeze (snapshots/render_ahead.py)
        from snapshots import render_ahead

        episode_finished.connect(render_ahead.on_episode_finished, dispatch_uid="snapshots.render_ahead")
