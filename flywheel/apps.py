from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    """What is left of the flywheel app: its migrations, the history of the tables the lifecycle apps now own
    (projects, rollouts, snapshots, training, cycles). A database made before the split upgrades through them."""
    name = "flywheel"
    verbose_name = "Flywheel (migration history)"
