import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('cycles', '0001_initial'),
        ('projects', '0001_initial'),
        ('rollouts', '0001_initial'),
        ('snapshots', '0001_initial'),
        ('training', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    # State only: the tables are flywheel's (made by its migrations 0001-0023) and keep their names and rows;
    # only Django's idea of which app owns each model moves.
    state_operations = [
        migrations.AddField(
            model_name='cycle',
            name='baseline',
            field=models.ForeignKey(blank=True, help_text='The deployed checkpoint the candidate was measured against.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='rollouts.checkpoint'),
        ),
        migrations.AddField(
            model_name='cycle',
            name='candidate',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='rollouts.checkpoint'),
        ),
        migrations.AddField(
            model_name='cycle',
            name='deployment',
            field=models.ForeignKey(blank=True, help_text='The deployment this cycle made.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='rollouts.deployment'),
        ),
        migrations.AddField(
            model_name='cycle',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='cycles', to='projects.project'),
        ),
        migrations.AddField(
            model_name='cycle',
            name='run',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='training.trainingrun'),
        ),
        migrations.AddField(
            model_name='cycle',
            name='snapshots',
            field=models.ManyToManyField(blank=True, related_name='cycles', to='snapshots.datasetsnapshot'),
        ),
        migrations.AddField(
            model_name='cycle',
            name='triggered_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='evaluation',
            name='checkpoint',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='evaluations', to='rollouts.checkpoint'),
        ),
        migrations.AddField(
            model_name='evaluation',
            name='cycle',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='evaluations', to='cycles.cycle'),
        ),
        migrations.AddConstraint(
            model_name='cycle',
            constraint=models.UniqueConstraint(fields=('project', 'iteration'), name='cycle_unique_iteration'),
        ),
        migrations.AddConstraint(
            model_name='cycle',
            constraint=models.UniqueConstraint(condition=models.Q(('state__in', ('deployed', 'rejected', 'skipped', 'failed')), _negated=True), fields=('project',), name='cycle_one_running'),
        ),
        migrations.AddConstraint(
            model_name='evaluation',
            constraint=models.UniqueConstraint(condition=models.Q(('cycle__isnull', False)), fields=('cycle', 'checkpoint'), name='evaluation_once_per_cycle'),
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
