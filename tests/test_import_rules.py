"""The import rules of docs/architecture.md hold (pyproject's [tool.importlinter] contracts, checked by import-linter)."""
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*LINT, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)})


def test_the_apps_keep_the_import_rules():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_an_app_importing_what_its_rule_forbids_breaks_the_lint(tmp_path):
    """The contracts bite: a copy of the tree where training imports the trainer, rollouts imports the cycles above
    it, and agent imports Django fails three contracts."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    for package in (*config["root_packages"], "django", "celery", "channels"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    contracts = config["contracts"]
    for module in {m for c in contracts for key in ("source_modules", "forbidden_modules") for m in c.get(key, [])}:
        if "." in module:  # a contract on one module of an app: the module, empty, so the contract can be read
            (tmp_path / (module.replace(".", "/") + ".py")).touch()
    (tmp_path / "training" / "runs.py").write_text("from trainer import coldstart\n")
    (tmp_path / "trainer" / "coldstart.py").write_text("")
    (tmp_path / "rollouts" / "worker.py").write_text("from cycles import cycle_settings\n")
    (tmp_path / "cycles" / "cycle_settings.py").write_text("")
    (tmp_path / "agent" / "policy.py").write_text("import django\n")
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "training.runs -> trainer.coldstart" in result.stdout, result.stdout[-3000:]
    assert "rollouts.worker -> cycles.cycle_settings" in result.stdout, result.stdout[-3000:]
    assert "agent.policy -> django" in result.stdout, result.stdout[-3000:]
    assert "3 broken" in result.stdout
