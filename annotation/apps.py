from django.apps import AppConfig

from rollouts.signals import episode_finished


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self):
        # rollouts announces a finished episode; the judge (annotation/judge.py) queues its verdict when the project
        # judges every episode. Connected in every process that finishes episodes: web, rollout workers, envservice.
        from annotation import judge  # its models: not importable before the app registry is ready

        episode_finished.connect(judge.on_episode_finished, dispatch_uid="annotation.judge")
