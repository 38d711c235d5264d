from django.apps import AppConfig


class CoreConfig(AppConfig):
    """What every app may import and that imports no app: the one application error and the API's error
    shape, the audit log, shared API helpers."""

    name = "core"
    verbose_name = "Loupe core"
