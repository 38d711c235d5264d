"""Every training run is a list of stages (flywheel/training.py): the cold start becomes one ``coldstart`` stage
and a run on one snapshot one stage; recipe runs already have their stages."""
from django.db import migrations

COLDSTART_KEYS = ("seeds", "max_steps", "max_seconds")


def forwards(apps, schema_editor):
    TrainingRun = apps.get_model("flywheel", "TrainingRun")
    for run in TrainingRun.objects.exclude(config__has_key="stages"):
        config = dict(run.config or {})
        if config.pop("coldstart", False):
            options = {**{k: config[k] for k in COLDSTART_KEYS if k in config}, **config.pop("options", {})}
            stage = {"algorithm": "coldstart", **options}
            config = {"deploy_as": config.get("deploy_as", "v0")}
        else:
            stage = {"algorithm": run.algorithm, "snapshot": run.snapshot_id,
                     **{k: config.pop(k) for k in ("max_steps", "max_seconds", "max_epochs") if k in config}}
        run.config = {**config, "stages": [stage]}
        run.save(update_fields=["config"])


class Migration(migrations.Migration):
    dependencies = [("flywheel", "0009_snapshot_source_key")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
