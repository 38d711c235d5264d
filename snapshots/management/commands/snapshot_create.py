"""Freeze a dataset snapshot from the command line: `python manage.py snapshot_create <project> <kind>`."""
import json

from django.core.management.base import BaseCommand, CommandError

from core.errors import ApplicationError
from projects.models import Project
from snapshots import build
from snapshots.models import SnapshotKind


class Command(BaseCommand):
    help = "Freeze the rows of one bucket (sft, dpo, rl, ct, prm) of a project into an immutable snapshot."

    def add_arguments(self, parser):
        parser.add_argument("project", help="Project slug or id.")
        parser.add_argument("kind", choices=SnapshotKind.values)
        parser.add_argument("--name", default="")
        parser.add_argument("--filter", default="{}", help='JSON, e.g. \'{"split": "train", "only_new": true}\'.')

    def handle(self, *args, project, kind, name, filter, **options):
        found = Project.objects.filter(slug=project).first() or \
            (Project.objects.filter(pk=int(project)).first() if project.isdigit() else None)
        if found is None:
            raise CommandError(f"No project '{project}'.")
        try:
            snapshot = build.snapshot_create(project=found, kind=kind, name=name, filter=json.loads(filter),
                                                build=False)
            snapshot = build.snapshot_build(snapshot_id=snapshot.pk)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--filter is not JSON: {exc}") from None
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        if snapshot.status != "ready":
            raise CommandError(f"Snapshot {snapshot.pk} failed: {snapshot.error}")
        self.stdout.write(json.dumps({"id": snapshot.pk, "kind": snapshot.kind, "rows": snapshot.rows,
                                      "episodes": snapshot.episodes, "sha256": snapshot.sha256, "file": snapshot.file}))
