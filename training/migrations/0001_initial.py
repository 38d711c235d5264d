import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('projects', '0001_initial'),
        ('rollouts', '0001_initial'),
        ('snapshots', '0001_initial'),
    ]

    # State only: the tables are flywheel's (made by its migrations 0001-0023) and keep their names and rows;
    # only Django's idea of which app owns each model moves.
    state_operations = [
        migrations.CreateModel(
            name='TrainingRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('algorithm', models.CharField(max_length=8)),
                ('config', models.JSONField(blank=True, default=dict)),
                ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=16)),
                ('progress', models.FloatField(default=0.0)),
                ('metrics', models.JSONField(blank=True, default=list, help_text="The trainer's progress lines, in order.")),
                ('warnings', models.JSONField(blank=True, default=list, help_text='What a person should know about how training went (cut by its time budget, capped epochs).')),
                ('log', models.TextField(blank=True)),
                ('error', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('heartbeat_at', models.DateTimeField(blank=True, help_text='Kept fresh while a train worker runs it.', null=True)),
                ('checkpoint', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='rollouts.checkpoint')),
                ('init_checkpoint', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='rollouts.checkpoint')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='projects.project')),
                ('snapshot', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='snapshots.datasetsnapshot')),
            ],
            options={
                'db_table': 'flywheel_trainingrun',
                'ordering': ['-created_at', '-id'],
            },
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
