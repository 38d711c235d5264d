from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('flywheel', '0023_action_format_names'),
    ]

    # State only: the tables are flywheel's (made by its migrations 0001-0023) and keep their names and rows;
    # only Django's idea of which app owns each model moves.
    state_operations = [
        migrations.CreateModel(
            name='Cycle',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('iteration', models.PositiveIntegerField()),
                ('state', models.CharField(choices=[('gate', 'Gate'), ('snapshot', 'Snapshot'), ('train', 'Train'), ('evaluate', 'Evaluate'), ('decide', 'Decide'), ('deployed', 'Deployed'), ('rejected', 'Rejected'), ('skipped', 'Skipped'), ('failed', 'Failed')], default='gate', max_length=16)),
                ('trigger', models.CharField(default='manual', help_text='manual, schedule or command.', max_length=16)),
                ('config', models.JSONField(blank=True, default=dict, help_text='The cycle settings it runs with, fixed at its start.')),
                ('decision', models.CharField(blank=True, max_length=300)),
                ('decision_data', models.JSONField(blank=True, default=dict, help_text='The numbers behind the decision.')),
                ('error', models.TextField(blank=True)),
                ('log_tail', models.TextField(blank=True)),
                ('timings', models.JSONField(blank=True, default=dict, help_text='Per state: started, finished, seconds.')),
                ('progress', models.JSONField(blank=True, default=dict, help_text='Of the long state now running: done, total, label.')),
                ('worker', models.CharField(blank=True, help_text="Who holds the cycle's lease now.", max_length=200)),
                ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                ('started_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'db_table': 'flywheel_cycle',
                'ordering': ['-iteration'],
            },
        ),
        migrations.CreateModel(
            name='Evaluation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(blank=True, help_text='In a cycle: candidate or deployed.', max_length=12)),
                ('split', models.CharField(choices=[('train', 'Train'), ('eval', 'Eval')], default='eval', max_length=8)),
                ('seeds', models.JSONField(blank=True, default=list)),
                ('episodes', models.PositiveIntegerField(default=0)),
                ('success_rate', models.FloatField(blank=True, null=True)),
                ('mean_reward', models.FloatField(blank=True, null=True)),
                ('details', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'db_table': 'flywheel_evaluation',
                'ordering': ['-created_at', '-id'],
            },
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
