from django.apps import AppConfig


class WebappConfig(AppConfig):
    name = "webapp"
    verbose_name = "Loupe accounts"
