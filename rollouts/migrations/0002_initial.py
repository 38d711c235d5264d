import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('cycles', '0002_initial'),
        ('projects', '0001_initial'),
        ('rollouts', '0001_initial'),
        ('training', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    # State only: the tables are flywheel's (made by its migrations 0001-0023) and keep their names and rows;
    # only Django's idea of which app owns each model moves.
    state_operations = [
        migrations.AddField(
            model_name='checkpoint',
            name='produced_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='training.trainingrun'),
        ),
        migrations.AddField(
            model_name='checkpoint',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='checkpoints', to='projects.project'),
        ),
        migrations.AddField(
            model_name='correctionreplay',
            name='cycle',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='correction_replays', to='cycles.cycle'),
        ),
        migrations.AddField(
            model_name='deployment',
            name='checkpoint',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='deployments', to='rollouts.checkpoint'),
        ),
        migrations.AddField(
            model_name='deployment',
            name='created_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='deployment',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deployments', to='projects.project'),
        ),
        migrations.AddField(
            model_name='episode',
            name='checkpoint',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='episodes', to='rollouts.checkpoint'),
        ),
        migrations.AddField(
            model_name='episode',
            name='controller',
            field=models.ForeignKey(blank=True, help_text='The one person steering a supervised episode.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='episode',
            name='created_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='episode',
            name='parent',
            field=models.ForeignKey(blank=True, help_text='The episode this one branched from (same task and seed).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='branches', to='rollouts.episode'),
        ),
        migrations.AddField(
            model_name='episode',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='episodes', to='projects.project'),
        ),
        migrations.AddField(
            model_name='episode',
            name='task',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='episodes', to='projects.taskspec'),
        ),
        migrations.AddField(
            model_name='event',
            name='episode',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='rollouts.episode'),
        ),
        migrations.AddField(
            model_name='judgement',
            name='created_by',
            field=models.ForeignKey(blank=True, help_text='Who asked for it; empty when it ran after the episode.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='judgement',
            name='episode',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='judgements', to='rollouts.episode'),
        ),
        migrations.AddField(
            model_name='rejection',
            name='checkpoint',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='rollouts.checkpoint'),
        ),
        migrations.AddField(
            model_name='rejection',
            name='episode',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='rejections', to='rollouts.episode'),
        ),
        migrations.AddField(
            model_name='rejection',
            name='rejected_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='step',
            name='checkpoint',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='rollouts.checkpoint'),
        ),
        migrations.AddField(
            model_name='step',
            name='episode',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='rollouts.episode'),
        ),
        migrations.AddField(
            model_name='step',
            name='intervened_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='rejection',
            name='step',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='rejections', to='rollouts.step'),
        ),
        migrations.AddField(
            model_name='correctionreplay',
            name='step',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='correction_replays', to='rollouts.step'),
        ),
        migrations.AddConstraint(
            model_name='checkpoint',
            constraint=models.UniqueConstraint(fields=('project', 'name'), name='checkpoint_name_unique'),
        ),
        migrations.AddConstraint(
            model_name='deployment',
            constraint=models.UniqueConstraint(condition=models.Q(('active', True)), fields=('project',), name='deployment_one_active'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(condition=models.Q(('rl_run', ''), _negated=True), fields=['project', 'rl_run', '-id'], name='episode_project_rl_run'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(fields=['project', '-created_at', '-id'], name='episode_project_recent'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(condition=models.Q(('asked_at__isnull', False)), fields=['project', 'asked_at'], name='episode_asking'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(fields=['project', 'status', '-id'], name='episode_project_status'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(fields=['status', 'heartbeat_at'], name='episode_liveness'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(fields=['project', 'review_status', '-id'], name='episode_project_review'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(fields=['project', 'task', '-id'], name='episode_project_task'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(fields=['project', 'checkpoint', '-id'], name='episode_project_checkpoint'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(fields=['project', 'created_by', '-id'], name='episode_project_annotator'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(fields=['project', '-n_steps', '-id'], name='episode_project_steps'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(fields=['project', '-n_interventions', '-id'], name='episode_project_interventions'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(condition=models.Q(('review_reason', ''), _negated=True), fields=['project', '-id'], name='episode_project_disagreement'),
        ),
        migrations.AddIndex(
            model_name='episode',
            index=models.Index(condition=models.Q(('status', 'queued')), fields=['mode', 'id'], name='episode_queued_lane'),
        ),
        migrations.AddConstraint(
            model_name='event',
            constraint=models.UniqueConstraint(fields=('episode', 'seq'), name='event_unique_seq'),
        ),
        migrations.AddIndex(
            model_name='judgement',
            index=models.Index(condition=models.Q(('latest', True)), fields=['episode', 'verdict'], name='judgement_latest'),
        ),
        migrations.AddConstraint(
            model_name='judgement',
            constraint=models.UniqueConstraint(condition=models.Q(('latest', True)), fields=('episode',), name='judgement_one_latest'),
        ),
        migrations.AddConstraint(
            model_name='step',
            constraint=models.UniqueConstraint(fields=('episode', 'index'), name='step_unique_index'),
        ),
        migrations.AddConstraint(
            model_name='rejection',
            constraint=models.UniqueConstraint(fields=('episode', 'step_index', 'attempt'), name='rejection_unique_attempt'),
        ),
        migrations.AddIndex(
            model_name='correctionreplay',
            index=models.Index(fields=['step', 'cycle'], name='correction_replay_by_step'),
        ),
        migrations.AddConstraint(
            model_name='correctionreplay',
            constraint=models.UniqueConstraint(fields=('cycle', 'step'), name='correction_replay_once'),
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
