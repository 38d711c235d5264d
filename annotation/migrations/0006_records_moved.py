import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0005_redactionmark'),
        ('projects', '0001_initial'),
        ('rollouts', '0001_initial'),
    ]

    # State only: the tables are flywheel's (made by its migrations 0001-0023) and keep their names and rows;
    # only Django's idea of which app owns each model moves.
    state_operations = [
        migrations.AlterField(
            model_name='audioclip',
            name='episode',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='audio_clips', to='rollouts.episode'),
        ),
        migrations.AlterField(
            model_name='command',
            name='episode',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='commands', to='rollouts.episode'),
        ),
        migrations.AlterField(
            model_name='intervention',
            name='episode',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='interventions', to='rollouts.episode'),
        ),
        migrations.AlterField(
            model_name='intervention',
            name='step',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='interventions', to='rollouts.step'),
        ),
        migrations.AlterField(
            model_name='queueitem',
            name='episode',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='queue_items', to='rollouts.episode'),
        ),
        migrations.AlterField(
            model_name='redactionmark',
            name='episode',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='rollouts.episode'),
        ),
        migrations.AlterField(
            model_name='redactionmark',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='projects.project'),
        ),
        migrations.AlterField(
            model_name='review',
            name='episode',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='reviews', to='rollouts.episode'),
        ),
        migrations.AlterField(
            model_name='reviewqueue',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='review_queues', to='projects.project'),
        ),
        migrations.AlterField(
            model_name='transcriptword',
            name='step',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='transcript_words', to='rollouts.step'),
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
