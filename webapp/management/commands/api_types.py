"""The frontend's wire types, generated from the live OpenAPI schema: `manage.py api_types` writes
frontend/src/api/schema.d.ts (openapi-typescript, from frontend/node_modules); `--check` only compares and fails when
the checked-in file is not what the schema gives (tests/webapp/test_openapi_types.py runs it in `make test`)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

FRONTEND = Path(settings.BASE_DIR) / "frontend"
TYPES = FRONTEND / "src" / "api" / "schema.d.ts"
GENERATOR = FRONTEND / "node_modules" / "openapi-typescript" / "bin" / "cli.js"


def generated_types() -> str:
    """The schema, checked (no warning: an answer drf-spectacular cannot type is an error here), as TypeScript."""
    from drf_spectacular.drainage import GENERATOR_STATS

    node = shutil.which("node") or str(Path(settings.BASE_DIR) / ".venv" / "bin" / "node")
    if not GENERATOR.exists():
        raise CommandError(f"{GENERATOR} is missing: run `npm ci` in frontend/ (make setup does).")
    GENERATOR_STATS.reset()  # warnings of an earlier schema in this process are not this one's
    with tempfile.TemporaryDirectory() as tmp:
        schema, types = Path(tmp) / "openapi.json", Path(tmp) / "schema.d.ts"
        call_command("spectacular", "--format", "openapi-json", "--file", str(schema), "--validate", "--fail-on-warn")
        result = subprocess.run([node, str(GENERATOR), str(schema), "--output", str(types)], cwd=FRONTEND,
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise CommandError(f"openapi-typescript failed: {result.stderr[-2000:]}")
        return types.read_text()


class Command(BaseCommand):
    help = "Write frontend/src/api/schema.d.ts from the OpenAPI schema (--check: fail when it differs)."

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="Compare only; fail when the file is out of date.")

    def handle(self, *args, check: bool = False, **options):
        text = generated_types()
        if check:
            if not TYPES.exists() or TYPES.read_text() != text:
                raise CommandError(f"{os.path.relpath(TYPES, settings.BASE_DIR)} is not what the API's schema gives: run "
                                   "`python manage.py api_types` and commit the file (and the frontend's changes it "
                                   "asks for: `npx tsc --noEmit` in frontend/).")
            self.stdout.write("The frontend's wire types match the schema.")
            return
        TYPES.write_text(text)
        self.stdout.write(f"Wrote {os.path.relpath(TYPES, settings.BASE_DIR)}.")
