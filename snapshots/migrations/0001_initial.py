import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('projects', '0001_initial'),
        ('rollouts', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    # State only: the tables are flywheel's (made by its migrations 0001-0023) and keep their names and rows;
    # only Django's idea of which app owns each model moves.
    state_operations = [
        migrations.CreateModel(
            name='DatasetSnapshot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('sft', 'Sft'), ('dpo', 'Dpo'), ('rl', 'Rl'), ('ct', 'Ct'), ('prm', 'Prm')], max_length=8)),
                ('name', models.CharField(blank=True, max_length=200)),
                ('filter', models.JSONField(blank=True, default=dict)),
                ('routing', models.JSONField(blank=True, default=dict, help_text='The validator settings the rows were routed with.')),
                ('status', models.CharField(choices=[('building', 'Building'), ('ready', 'Ready'), ('failed', 'Failed')], default='building', max_length=12)),
                ('progress', models.FloatField(default=0.0)),
                ('source_key', models.CharField(blank=True, db_index=True, help_text='sha256 of kind, filter, routing and the episodes asked for: a second freeze of the same data returns this snapshot instead of a copy.', max_length=64)),
                ('started_at', models.DateTimeField(blank=True, help_text='When a worker began writing it.', null=True)),
                ('error', models.TextField(blank=True)),
                ('rows', models.PositiveIntegerField(default=0)),
                ('episodes', models.PositiveIntegerField(default=0)),
                ('size_bytes', models.PositiveBigIntegerField(default=0)),
                ('sha256', models.CharField(blank=True, help_text='Of the JSONL file.', max_length=64)),
                ('file', models.CharField(blank=True, help_text='Storage name of the JSONL file.', max_length=300)),
                ('parquet_file', models.CharField(blank=True, max_length=300)),
                ('lineage', models.JSONField(blank=True, default=dict, help_text='Counts by task and checkpoint; the episode list is in SnapshotEpisode, step ids in each row.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='snapshots', to='projects.project')),
            ],
            options={
                'db_table': 'flywheel_datasetsnapshot',
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='SnapshotEpisode',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('rows', models.PositiveIntegerField()),
                ('episode', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='rollouts.episode')),
                ('snapshot', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='members', to='snapshots.datasetsnapshot')),
            ],
            options={
                'db_table': 'flywheel_snapshotepisode',
                'indexes': [models.Index(fields=['episode', 'snapshot'], name='snapshot_episode_by_episode')],
                'constraints': [models.UniqueConstraint(fields=('snapshot', 'episode'), name='snapshot_episode_unique')],
            },
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
