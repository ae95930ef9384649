"""`./run.sh` installs nothing when the venv already holds every requirement
(tools/requirements_met.py), so `./run.sh test` does not reinstall packages or the project under
an app running from the same venv."""

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def met(tmp_path: Path, *lines: str) -> tuple[int, list[str]]:
    (tmp_path / "base.txt").write_text("pytest  # the runner\n", encoding="utf-8")
    (tmp_path / "reqs.txt").write_text("\n".join(["# a comment", "-r base.txt", *lines]) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "requirements_met.py"), str(tmp_path / "reqs.txt")],
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout.splitlines()


def test_met_requirements_install_nothing_and_unmet_ones_are_listed(tmp_path):
    hypothesis = version("hypothesis")
    assert met(tmp_path, f"hypothesis=={hypothesis}", "moto[server]") == (0, [])
    assert met(tmp_path, "hypothesis==0.0.1", "no-such-package-here==1.0") == (1, [
        f"hypothesis==0.0.1 (installed: {hypothesis})", "no-such-package-here==1.0 (not installed)"])


def test_run_sh_asks_before_it_installs():
    script = (ROOT / "run.sh").read_text(encoding="utf-8")
    check = script.index("tools/requirements_met.py")
    assert check < script.index("-m pip install")  # checked first, pip only for what is missing
    assert (ROOT / "requirements-dev.txt").is_file()
    assert subprocess.run([sys.executable, str(ROOT / "tools" / "requirements_met.py"),
                           str(ROOT / "requirements-dev.txt")], capture_output=True, timeout=60).returncode == 0
