from django.apps import AppConfig


class SnapshotsConfig(AppConfig):
    name = "snapshots"
