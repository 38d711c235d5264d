"""Import task files into a project: `python manage.py tasks_import --format osworld|webarena --project <id> PATH...`.

Each PATH is a JSON file (one task or a list) or a folder of them (its *.json files). All or nothing: one refused
task imports none, and every problem is listed, naming the file, the task and what is wrong or unsupported.

`--check` imports nothing: for OSWorld files (a folder of its domains' folders, as OSWorld's evaluation_examples/
examples holds them, or files) it prints a table per domain: files, importable, runnable here now (programs
installed, downloaded files in `--project`'s file store when given), tasks that download files and the files
missing; then what refused the others, counted."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.errors import ApplicationError
from projects import taskspec_authoring, taskspec_exchange
from projects.models import Project


class Command(BaseCommand):
    help = ("Import OSWorld (desktop) or WebArena / any-URL (webapp) task files into a project, all or none, as the "
            "Tasks page's import does; --check prints what of a folder of OSWorld files would import and run.")

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH", help="A task file (JSON) or a folder of them.")
        parser.add_argument("--format", required=True, choices=sorted(taskspec_authoring.FORMATS),
                            help="osworld: desktop tasks; webarena: webapp tasks (WebArena-format or any-URL).")
        parser.add_argument("--project", help="Project id or slug (required but with --check, where it names the "
                                              "file store to look in).")
        parser.add_argument("--split", default="train", choices=["train", "eval"], help="The tasks' split.")
        parser.add_argument("--seeds", default="0-999", help="The tasks' seed range, FIRST-LAST (default 0-999).")
        parser.add_argument("--check", action="store_true", help="Import nothing; print the coverage table of "
                                                                  "OSWorld files (per domain).")
        parser.add_argument("--problems", action="store_true", help="With --check: each refused file's problems.")

    def handle(self, *args, paths, format, project, split, seeds, check, problems, **options):
        found = self._project(project) if project else None
        if found is None and not check:
            raise CommandError("Say which project to import into: --project <id or slug>.")
        if check:
            if format != "osworld":
                raise CommandError("--check reads OSWorld files; give --format osworld.")
            return self._check(paths, found, problems)
        first, _, last = seeds.partition("-")
        if not (first.isdigit() and last.isdigit()):
            raise CommandError(f"--seeds {seeds!r}: write the range as FIRST-LAST, e.g. 0-999.")
        files = _files(paths, recursive=False)
        try:
            created = taskspec_exchange.task_import(
                project=found, actor=None, format=format, split=split, seed_start=int(first), seed_end=int(last),
                files=[(str(path), path.read_bytes()) for path in files])
        except ApplicationError as exc:
            for problem in exc.errors.get("tasks") or [exc.message]:
                self.stderr.write(f"  {problem}")
            raise CommandError(exc.message if not exc.errors.get("tasks") else
                               f"Nothing was imported into {found.name}: {len(exc.errors['tasks'])} problem(s) above.")
        self.stdout.write(f"Imported {len(created)} task{'s' if len(created) != 1 else ''} into {found.name} "
                          f"({split}): {', '.join(task.task_name for task in created)}")

    @staticmethod
    def _project(project: str) -> Project:
        found = Project.objects.filter(slug=project).first() or \
            (Project.objects.filter(pk=int(project)).first() if project.isdigit() else None)
        if found is None:
            raise CommandError(f"No project '{project}' (give its id or slug).")
        return found

    def _check(self, paths, project, show_problems: bool) -> None:
        rows, refused = taskspec_authoring.osworld_coverage(_files(paths, recursive=True), project=project)
        store = f"the file store of {project.name}" if project else "no file store (--project names one)"
        self.stdout.write(f"OSWorld coverage ({store}; runnable: imports, its programs are installed here and no "
                          "file it downloads is missing)\n")
        header = ("domain", "files", "importable", "runnable", "need files", "missing files")
        widths = [max(len(header[0]), *(len(r.domain) for r in rows)), 6, 11, 9, 11, 14]
        line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))
        self.stdout.write(line)
        self.stdout.write("-" * len(line))
        for row in rows:
            share = f"{row.importable}/{row.files}"
            values = (row.domain, str(row.files), f"{share} {100 * row.importable // max(row.files, 1)}%",
                      str(row.runnable), str(row.need_files), str(row.missing_files))
            self.stdout.write("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                                        for i, (v, w) in enumerate(zip(values, widths))))
        total = rows[-1]
        if total.programs:
            self.stdout.write("\nNot installed here (tasks that start it): " + ", ".join(
                f"{name} ({count})" for name, count in sorted(total.programs.items(), key=lambda kv: -kv[1])))
        if total.problems:
            self.stdout.write("\nWhy the others were refused (files):")
            for reason, count in sorted(total.problems.items(), key=lambda kv: (-kv[1], kv[0])):
                self.stdout.write(f"  {count:4d}  {reason}")
        if show_problems:
            for path, problems in refused:
                self.stdout.write(f"\n{path}:")
                for problem in problems:
                    self.stdout.write(f"  - {problem}")


def _files(paths, *, recursive: bool) -> list[Path]:
    files = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.rglob("*.json") if recursive else path.glob("*.json"))
            if not found:
                raise CommandError(f"{path} holds no .json file.")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise CommandError(f"{path}: no such file or folder.")
    return files
