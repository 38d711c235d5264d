from django.apps import AppConfig


class WebappConfig(AppConfig):
    name = "webapp"
    verbose_name = "Loupe accounts"

    def ready(self):
        from webapp import schema  # noqa: F401 (registers the OpenAPI security schemes)
