from django.apps import AppConfig


class ShopsiteConfig(AppConfig):
    name = "shopsite"
    default_auto_field = "django.db.models.AutoField"
