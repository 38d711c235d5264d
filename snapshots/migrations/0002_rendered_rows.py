"""Stored renderings of episodes' rows (snapshots/stored_rows.py) and the triggers that make one stale: any change
to what an episode's rows are made of counts up its RowsVersion and drops its renderings, whichever code (or SQL)
made the change, in the same transaction."""
import django.db.models.deletion
from django.db import migrations, models

STALE = """
CREATE OR REPLACE FUNCTION snapshots_rows_stale(episode bigint) RETURNS void AS $$
BEGIN
    UPDATE snapshots_rowsversion SET version = version + 1 WHERE episode_id = episode;
    DELETE FROM snapshots_renderedrows WHERE episode_id = episode;
END $$ LANGUAGE plpgsql;

-- a table whose rows name their episode: steps, rejections, judgements
CREATE OR REPLACE FUNCTION snapshots_rows_stale_by_episode() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN PERFORM snapshots_rows_stale(OLD.episode_id); END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.episode_id IS DISTINCT FROM OLD.episode_id) THEN
        PERFORM snapshots_rows_stale(NEW.episode_id);
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

-- a correction's replays name its step
CREATE OR REPLACE FUNCTION snapshots_rows_stale_by_step() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM snapshots_rows_stale(episode_id) FROM flywheel_step WHERE id = OLD.step_id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM snapshots_rows_stale(episode_id) FROM flywheel_step WHERE id = NEW.step_id;
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION snapshots_rows_stale_episode() RETURNS trigger AS $$
BEGIN
    PERFORM snapshots_rows_stale(NEW.id);
    RETURN NULL;
END $$ LANGUAGE plpgsql;

-- a task's or checkpoint's record (its name is in every row's meta, a task's definition in RL rows)
CREATE OR REPLACE FUNCTION snapshots_rows_stale_by_task() RETURNS trigger AS $$
BEGIN
    PERFORM snapshots_rows_stale(id) FROM flywheel_episode WHERE task_id = NEW.id;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION snapshots_rows_stale_by_checkpoint() RETURNS trigger AS $$
BEGIN
    PERFORM snapshots_rows_stale(id) FROM flywheel_episode WHERE checkpoint_id = NEW.id;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE TRIGGER snapshots_rows_stale AFTER INSERT OR UPDATE OR DELETE ON flywheel_step
    FOR EACH ROW EXECUTE FUNCTION snapshots_rows_stale_by_episode();
CREATE TRIGGER snapshots_rows_stale AFTER INSERT OR UPDATE OR DELETE ON flywheel_rejection
    FOR EACH ROW EXECUTE FUNCTION snapshots_rows_stale_by_episode();
CREATE TRIGGER snapshots_rows_stale AFTER INSERT OR UPDATE OR DELETE ON flywheel_judgement
    FOR EACH ROW EXECUTE FUNCTION snapshots_rows_stale_by_episode();
CREATE TRIGGER snapshots_rows_stale AFTER INSERT OR UPDATE OR DELETE ON flywheel_correctionreplay
    FOR EACH ROW EXECUTE FUNCTION snapshots_rows_stale_by_step();
CREATE TRIGGER snapshots_rows_stale AFTER UPDATE ON flywheel_episode
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION snapshots_rows_stale_episode();
CREATE TRIGGER snapshots_rows_stale AFTER UPDATE ON flywheel_taskspec
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION snapshots_rows_stale_by_task();
CREATE TRIGGER snapshots_rows_stale AFTER UPDATE ON flywheel_checkpoint
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION snapshots_rows_stale_by_checkpoint();
-- the rows are compressed JSON: lz4 reads back faster than the default pglz, where the server has it (the embedded
-- PostgreSQL of `make run`, pgserver's build, has not: pglz then)
DO $$ BEGIN
    ALTER TABLE snapshots_renderedrows ALTER COLUMN jsonl SET COMPRESSION lz4;
    ALTER TABLE snapshots_renderedrows ALTER COLUMN parquet SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN NULL;
END $$;
"""
UNSTALE = """
DROP TRIGGER IF EXISTS snapshots_rows_stale ON flywheel_step;
DROP TRIGGER IF EXISTS snapshots_rows_stale ON flywheel_rejection;
DROP TRIGGER IF EXISTS snapshots_rows_stale ON flywheel_judgement;
DROP TRIGGER IF EXISTS snapshots_rows_stale ON flywheel_correctionreplay;
DROP TRIGGER IF EXISTS snapshots_rows_stale ON flywheel_episode;
DROP TRIGGER IF EXISTS snapshots_rows_stale ON flywheel_taskspec;
DROP TRIGGER IF EXISTS snapshots_rows_stale ON flywheel_checkpoint;
DROP FUNCTION IF EXISTS snapshots_rows_stale_by_episode();
DROP FUNCTION IF EXISTS snapshots_rows_stale_by_step();
DROP FUNCTION IF EXISTS snapshots_rows_stale_episode();
DROP FUNCTION IF EXISTS snapshots_rows_stale_by_task();
DROP FUNCTION IF EXISTS snapshots_rows_stale_by_checkpoint();
DROP FUNCTION IF EXISTS snapshots_rows_stale(bigint);
"""


class Migration(migrations.Migration):

    dependencies = [
        ('rollouts', '0002_initial'),
        ('snapshots', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='RowsVersion',
            fields=[
                ('episode', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='rollouts.episode')),
                ('version', models.BigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name='RenderedRows',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('sft', 'Sft'), ('dpo', 'Dpo'), ('rl', 'Rl'), ('ct', 'Ct'), ('prm', 'Prm')], max_length=8)),
                ('key', models.CharField(max_length=64)),
                ('version', models.BigIntegerField(help_text="The episode's RowsVersion when its rows were read.")),
                ('rows', models.PositiveIntegerField()),
                ('task', models.TextField(help_text="The episode's task name (the snapshot's lineage counts).")),
                ('checkpoint', models.TextField(help_text="Its checkpoint's name, '(none)' without one.")),
                ('jsonl', models.BinaryField(help_text="The rows' lines as data.jsonl holds them.")),
                ('parquet', models.BinaryField(help_text="The rows as data.parquet takes them: JSON lines in the rows' own key order, meta as a JSON string.")),
                ('episode', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='rollouts.episode')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('episode', 'kind', 'key'), name='rendered_rows_unique')],
            },
        ),
        migrations.RunSQL(STALE, UNSTALE),
    ]
