"""The triggers of migration 0002 on steps, rejections, judgements and replays fire once a statement, not once a row:
a bulk insert or delete (a project's steps deleted with it, a backfill) counts up the episodes it touched with one
UPDATE and one DELETE, instead of two statements a row."""
from django.db import migrations

BY_STATEMENT = """
CREATE OR REPLACE FUNCTION snapshots_rows_stale_all(episodes bigint[]) RETURNS void AS $$
BEGIN
    UPDATE snapshots_rowsversion SET version = version + 1 WHERE episode_id = ANY(episodes);
    DELETE FROM snapshots_renderedrows WHERE episode_id = ANY(episodes);
END $$ LANGUAGE plpgsql;

-- a table whose rows name their episode: steps, rejections, judgements (the tables a statement changed)
CREATE OR REPLACE FUNCTION snapshots_rows_stale_by_episodes() RETURNS trigger AS $$
DECLARE episodes bigint[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(DISTINCT episode_id) INTO episodes FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(DISTINCT episode_id) INTO episodes FROM old_rows;
    ELSE
        SELECT array_agg(episode_id) INTO episodes
        FROM (SELECT episode_id FROM old_rows UNION SELECT episode_id FROM new_rows) AS changed;
    END IF;
    IF episodes IS NOT NULL THEN PERFORM snapshots_rows_stale_all(episodes); END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

-- a correction's replays name its step
CREATE OR REPLACE FUNCTION snapshots_rows_stale_by_steps() RETURNS trigger AS $$
DECLARE episodes bigint[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(DISTINCT s.episode_id) INTO episodes FROM new_rows r JOIN flywheel_step s ON s.id = r.step_id;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(DISTINCT s.episode_id) INTO episodes FROM old_rows r JOIN flywheel_step s ON s.id = r.step_id;
    ELSE
        SELECT array_agg(DISTINCT s.episode_id) INTO episodes
        FROM (SELECT step_id FROM old_rows UNION SELECT step_id FROM new_rows) AS r JOIN flywheel_step s ON s.id = r.step_id;
    END IF;
    IF episodes IS NOT NULL THEN PERFORM snapshots_rows_stale_all(episodes); END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
"""

def _statement_triggers(table: str, function: str) -> str:
    return f"""
DROP TRIGGER IF EXISTS snapshots_rows_stale ON {table};
CREATE TRIGGER snapshots_rows_stale_insert AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {function}();
CREATE TRIGGER snapshots_rows_stale_update AFTER UPDATE ON {table} REFERENCING OLD TABLE AS old_rows
    NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {function}();
CREATE TRIGGER snapshots_rows_stale_delete AFTER DELETE ON {table} REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION {function}();
"""

def _row_trigger(table: str, function: str) -> str:
    return f"""
DROP TRIGGER IF EXISTS snapshots_rows_stale_insert ON {table};
DROP TRIGGER IF EXISTS snapshots_rows_stale_update ON {table};
DROP TRIGGER IF EXISTS snapshots_rows_stale_delete ON {table};
CREATE TRIGGER snapshots_rows_stale AFTER INSERT OR UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION {function}();
"""

TABLES = (("flywheel_step", "episodes"), ("flywheel_rejection", "episodes"), ("flywheel_judgement", "episodes"),
          ("flywheel_correctionreplay", "steps"))
FORWARD = BY_STATEMENT + "".join(_statement_triggers(table, f"snapshots_rows_stale_by_{by}") for table, by in TABLES)
BACKWARD = "".join(_row_trigger(table, f"snapshots_rows_stale_by_{by[:-1]}") for table, by in TABLES) + """
DROP FUNCTION IF EXISTS snapshots_rows_stale_by_episodes();
DROP FUNCTION IF EXISTS snapshots_rows_stale_by_steps();
DROP FUNCTION IF EXISTS snapshots_rows_stale_all(bigint[]);
"""

class Migration(migrations.Migration):

    dependencies = [
        ('snapshots', '0002_rendered_rows'),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
