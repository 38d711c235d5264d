# Written by hand (makemigrations could not import the tree while flywheel/api.py was mid-refactor); checked with
# `manage.py makemigrations --check` afterwards.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0004_audioclip_voice_commands'),
        ('flywheel', '0020_project_file'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='RedactionMark',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(max_length=32)),
                ('verdict', models.CharField(choices=[('wrong_hit', 'Wrong Hit'), ('missed', 'Missed')], max_length=12)),
                ('text', models.CharField(help_text='What was hidden, or what should have been.', max_length=300)),
                ('step_index', models.PositiveIntegerField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('episode', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='flywheel.episode')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='flywheel.project')),
                ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['id'],
                'constraints': [models.UniqueConstraint(fields=('project', 'kind', 'verdict', 'text'), name='redactionmark_unique_text')],
            },
        ),
    ]
