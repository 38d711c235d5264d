import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('flywheel', '0023_action_format_names'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    # State only: the tables are flywheel's (made by its migrations 0001-0023) and keep their names and rows;
    # only Django's idea of which app owns each model moves.
    state_operations = [
        migrations.CreateModel(
            name='Project',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=64, unique=True)),
                ('name', models.CharField(max_length=200)),
                ('description', models.TextField(blank=True)),
                ('settings', models.JSONField(blank=True, default=dict, help_text='Routing, recipe and cycle settings.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'db_table': 'flywheel_project',
                'ordering': ['name', 'id'],
            },
        ),
        migrations.CreateModel(
            name='Membership',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('annotator', 'Annotator'), ('manager', 'Manager'), ('admin', 'Admin')], max_length=16)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='projects.project')),
            ],
            options={
                'db_table': 'flywheel_membership',
                'ordering': ['id'],
                'constraints': [models.UniqueConstraint(fields=('project', 'user'), name='membership_unique')],
            },
        ),
        migrations.CreateModel(
            name='ProjectFile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('url', models.TextField()),
                ('path', models.CharField(blank=True, help_text="The VM path a download writes (or a check's dest name); empty: any.", max_length=1000)),
                ('name', models.CharField(help_text="The uploaded file's name.", max_length=255)),
                ('stored', models.CharField(help_text='Storage name, addressed by sha256.', max_length=200)),
                ('sha256', models.CharField(max_length=64)),
                ('size', models.PositiveBigIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='files', to='projects.project')),
                ('uploaded_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'flywheel_projectfile',
                'ordering': ['url', 'path', 'id'],
                'constraints': [models.UniqueConstraint(fields=('project', 'url', 'path'), name='projectfile_unique')],
            },
        ),
        migrations.CreateModel(
            name='TaskSpec',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('env_kind', models.CharField(default='miniwob', max_length=32)),
                ('task_name', models.CharField(max_length=100)),
                ('instruction_template', models.TextField(blank=True)),
                ('seed_start', models.PositiveIntegerField(default=0)),
                ('seed_end', models.PositiveIntegerField(default=999)),
                ('split', models.CharField(choices=[('train', 'Train'), ('eval', 'Eval')], default='train', max_length=8)),
                ('max_steps', models.PositiveIntegerField(default=10)),
                ('definition', models.JSONField(blank=True, help_text="An authored task's own JSON (OSWorld for desktop, WebArena or any-URL for webapp), handed to the env before each episode; null for a shipped task, found by its name (projects/taskspec_authoring.py).", null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tasks', to='projects.project')),
            ],
            options={
                'db_table': 'flywheel_taskspec',
                'ordering': ['task_name', 'split', 'id'],
                'constraints': [models.UniqueConstraint(fields=('project', 'env_kind', 'task_name', 'split'), name='taskspec_unique'), models.CheckConstraint(condition=models.Q(('seed_end__gte', models.F('seed_start'))), name='taskspec_seed_range')],
            },
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
