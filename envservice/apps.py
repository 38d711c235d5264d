from django.apps import AppConfig


class EnvServiceConfig(AppConfig):
    name = "envservice"
    verbose_name = "Environment service"
