"""The flywheel app's records moved to the lifecycle apps (projects, rollouts, snapshots, training, cycles) with
their tables: here they leave flywheel's migration state, the database untouched. Their content types follow them,
so permissions and admin log entries that name a model keep naming it."""
from django.db import migrations

MOVED = {'projects': ['project', 'membership', 'taskspec', 'projectfile'], 'rollouts': ['checkpoint', 'deployment', 'episode', 'step', 'rejection', 'event', 'judgement', 'correctionreplay'], 'snapshots': ['datasetsnapshot', 'snapshotepisode'], 'training': ['trainingrun'], 'cycles': ['evaluation', 'cycle']}


def content_types_follow(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for app, models in MOVED.items():
        ContentType.objects.filter(app_label="flywheel", model__in=models).update(app_label=app)


def content_types_back(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for app, models in MOVED.items():
        ContentType.objects.filter(app_label=app, model__in=models).update(app_label="flywheel")


class Migration(migrations.Migration):

    dependencies = [
        ("flywheel", "0023_action_format_names"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("projects", "0001_initial"),
        ("rollouts", "0002_initial"),
        ("snapshots", "0001_initial"),
        ("training", "0001_initial"),
        ("cycles", "0002_initial"),
        ("annotation", "0006_records_moved"),  # annotation's keys point at the moved models first
    ]

    state_operations = [
        migrations.RemoveField(
            model_name='deployment',
            name='checkpoint',
        ),
        migrations.RemoveField(
            model_name='step',
            name='checkpoint',
        ),
        migrations.RemoveField(
            model_name='trainingrun',
            name='checkpoint',
        ),
        migrations.RemoveField(
            model_name='evaluation',
            name='checkpoint',
        ),
        migrations.RemoveField(
            model_name='episode',
            name='checkpoint',
        ),
        migrations.RemoveField(
            model_name='cycle',
            name='candidate',
        ),
        migrations.RemoveField(
            model_name='rejection',
            name='checkpoint',
        ),
        migrations.RemoveField(
            model_name='cycle',
            name='baseline',
        ),
        migrations.RemoveField(
            model_name='trainingrun',
            name='init_checkpoint',
        ),
        migrations.RemoveField(
            model_name='correctionreplay',
            name='cycle',
        ),
        migrations.RemoveField(
            model_name='correctionreplay',
            name='step',
        ),
        migrations.RemoveField(
            model_name='cycle',
            name='deployment',
        ),
        migrations.RemoveField(
            model_name='cycle',
            name='project',
        ),
        migrations.RemoveField(
            model_name='cycle',
            name='run',
        ),
        migrations.RemoveField(
            model_name='cycle',
            name='snapshots',
        ),
        migrations.RemoveField(
            model_name='cycle',
            name='triggered_by',
        ),
        migrations.RemoveField(
            model_name='evaluation',
            name='cycle',
        ),
        migrations.RemoveField(
            model_name='datasetsnapshot',
            name='created_by',
        ),
        migrations.RemoveField(
            model_name='datasetsnapshot',
            name='project',
        ),
        migrations.RemoveField(
            model_name='trainingrun',
            name='snapshot',
        ),
        migrations.RemoveField(
            model_name='snapshotepisode',
            name='snapshot',
        ),
        migrations.RemoveField(
            model_name='deployment',
            name='created_by',
        ),
        migrations.RemoveField(
            model_name='deployment',
            name='project',
        ),
        migrations.RemoveField(
            model_name='episode',
            name='controller',
        ),
        migrations.RemoveField(
            model_name='episode',
            name='created_by',
        ),
        migrations.RemoveField(
            model_name='episode',
            name='parent',
        ),
        migrations.RemoveField(
            model_name='episode',
            name='project',
        ),
        migrations.RemoveField(
            model_name='episode',
            name='task',
        ),
        migrations.RemoveField(
            model_name='step',
            name='episode',
        ),
        migrations.RemoveField(
            model_name='snapshotepisode',
            name='episode',
        ),
        migrations.RemoveField(
            model_name='rejection',
            name='episode',
        ),
        migrations.RemoveField(
            model_name='judgement',
            name='episode',
        ),
        migrations.RemoveField(
            model_name='event',
            name='episode',
        ),
        migrations.RemoveField(
            model_name='judgement',
            name='created_by',
        ),
        migrations.RemoveField(
            model_name='membership',
            name='project',
        ),
        migrations.RemoveField(
            model_name='membership',
            name='user',
        ),
        migrations.RemoveField(
            model_name='trainingrun',
            name='project',
        ),
        migrations.RemoveField(
            model_name='projectfile',
            name='project',
        ),
        migrations.RemoveField(
            model_name='taskspec',
            name='project',
        ),
        migrations.RemoveField(
            model_name='projectfile',
            name='uploaded_by',
        ),
        migrations.RemoveField(
            model_name='rejection',
            name='rejected_by',
        ),
        migrations.RemoveField(
            model_name='rejection',
            name='step',
        ),
        migrations.RemoveField(
            model_name='step',
            name='intervened_by',
        ),
        migrations.DeleteModel(
            name='Checkpoint',
        ),
        migrations.DeleteModel(
            name='CorrectionReplay',
        ),
        migrations.DeleteModel(
            name='Cycle',
        ),
        migrations.DeleteModel(
            name='Evaluation',
        ),
        migrations.DeleteModel(
            name='DatasetSnapshot',
        ),
        migrations.DeleteModel(
            name='Deployment',
        ),
        migrations.DeleteModel(
            name='SnapshotEpisode',
        ),
            migrations.DeleteModel(
            name='Episode',
        ),
        migrations.DeleteModel(
            name='Event',
        ),
        migrations.DeleteModel(
            name='Judgement',
        ),
        migrations.DeleteModel(
            name='Membership',
        ),
        migrations.DeleteModel(
            name='TrainingRun',
        ),
        migrations.DeleteModel(
            name='Project',
        ),
        migrations.DeleteModel(
            name='TaskSpec',
        ),
        migrations.DeleteModel(
            name='ProjectFile',
        ),
        migrations.DeleteModel(
            name='Rejection',
        ),
        migrations.DeleteModel(
            name='Step',
        ),
        ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations),
        migrations.RunPython(content_types_follow, content_types_back),
    ]
