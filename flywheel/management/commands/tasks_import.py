"""Import task files into a project: `python manage.py tasks_import --format osworld|webarena --project <id> PATH...`.

Each PATH is a JSON file (one task or a list) or a folder of them (its *.json files). All or nothing: one refused
task imports none, and every problem is listed, naming the file, the task and what is wrong or unsupported."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.errors import ApplicationError
from flywheel import task_authoring
from flywheel.models import Project


class Command(BaseCommand):
    help = ("Import OSWorld (desktop) or WebArena / any-URL (webapp) task files into a project, all or none, as the "
            "Tasks page's import does.")

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH", help="A task file (JSON) or a folder of them.")
        parser.add_argument("--format", required=True, choices=sorted(task_authoring.FORMATS),
                            help="osworld: desktop tasks; webarena: webapp tasks (WebArena-format or any-URL).")
        parser.add_argument("--project", required=True, help="Project id or slug.")
        parser.add_argument("--split", default="train", choices=["train", "eval"], help="The tasks' split.")
        parser.add_argument("--seeds", default="0-999", help="The tasks' seed range, FIRST-LAST (default 0-999).")

    def handle(self, *args, paths, format, project, split, seeds, **options):
        found = Project.objects.filter(slug=project).first() or \
            (Project.objects.filter(pk=int(project)).first() if project.isdigit() else None)
        if found is None:
            raise CommandError(f"No project '{project}' (give its id or slug).")
        first, _, last = seeds.partition("-")
        if not (first.isdigit() and last.isdigit()):
            raise CommandError(f"--seeds {seeds!r}: write the range as FIRST-LAST, e.g. 0-999.")
        files = []
        for raw in paths:
            path = Path(raw)
            if path.is_dir():
                found_files = sorted(path.glob("*.json"))
                if not found_files:
                    raise CommandError(f"{path} holds no .json file.")
                files += found_files
            elif path.is_file():
                files.append(path)
            else:
                raise CommandError(f"{path}: no such file or folder.")
        try:
            created = task_authoring.task_import(
                project=found, actor=None, format=format, split=split, seed_start=int(first), seed_end=int(last),
                files=[(str(path), path.read_bytes()) for path in files])
        except ApplicationError as exc:
            for problem in exc.errors.get("tasks") or [exc.message]:
                self.stderr.write(f"  {problem}")
            raise CommandError(exc.message if not exc.errors.get("tasks") else
                               f"Nothing was imported into {found.name}: {len(exc.errors['tasks'])} problem(s) above.")
        self.stdout.write(f"Imported {len(created)} task{'s' if len(created) != 1 else ''} into {found.name} "
                          f"({split}): {', '.join(task.task_name for task in created)}")
