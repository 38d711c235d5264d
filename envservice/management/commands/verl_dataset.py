"""``python manage.py verl_dataset --project 1 --out DIR``: a project's tasks (and RL snapshots) as verl's parquet."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.errors import ApplicationError
from envservice.verl_export import snapshot_rows, task_rows, write_parquet
from snapshots.models import DatasetSnapshot


class Command(BaseCommand):
    help = ("Write a project's tasks as verl dataset rows (DIR/train.parquet, DIR/val.parquet) for the Loupe agent "
            "loop, and with --snapshot an RL snapshot's rows (DIR/snapshot-<id>.parquet).")

    def add_arguments(self, parser):
        parser.add_argument("--project", type=int, required=True)
        parser.add_argument("--out", required=True, help="Directory to write the parquet files to.")
        parser.add_argument("--seeds-per-task", type=int, default=64, help="Seeds of each task, from its first.")
        parser.add_argument("--format", default="loupe", help="The action format the model answers in.")
        parser.add_argument("--prompt-style", default="full", help="The prompt style of the model (agent.prompt).")
        parser.add_argument("--snapshot", type=int, action="append", default=[], help="An RL snapshot's id too.")

    def handle(self, *args, **opts):
        out = Path(opts["out"])
        try:
            rows = task_rows(project_id=opts["project"], seeds_per_task=opts["seeds_per_task"],
                             action_format=opts["format"], prompt_style=opts["prompt_style"])
            for split, name in (("train", "train.parquet"), ("val", "val.parquet")):
                if rows[split]:
                    write_parquet(rows[split], out / name)
                    self.stdout.write(f"{out / name}: {len(rows[split])} rows")
            for snapshot_id in opts["snapshot"]:
                snapshot = DatasetSnapshot.objects.filter(pk=snapshot_id, project_id=opts["project"]).first()
                if snapshot is None:
                    raise CommandError(f"No snapshot {snapshot_id} in project {opts['project']}.")
                path = write_parquet(snapshot_rows(snapshot=snapshot), out / f"snapshot-{snapshot_id}.parquet")
                self.stdout.write(f"{path}: {snapshot.rows} rows")
        except ApplicationError as exc:
            raise CommandError(str(exc)) from exc
