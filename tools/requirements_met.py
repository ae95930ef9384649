"""Whether a virtualenv already holds what a requirements file asks for: `./run.sh` runs this
with the venv's Python before it would run pip, and installs nothing when every requirement is
met, so `./run.sh test` does not reinstall packages (nor the project) under an app running from
the same venv; pip runs only when something is missing or at another version.

    python tools/requirements_met.py requirements-dev.txt   # exit 0: all met; 1: lists what is not

Reads `-r other.txt` lines (relative to the file), ignores comments and other options, and
compares each requirement's version specifier with the installed distribution's version
(extras are not checked: `moto[server]` counts as met when moto is installed).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:
    from packaging.requirements import Requirement
except ImportError:  # a venv with pip alone: pip's own copy
    from pip._vendor.packaging.requirements import Requirement


def requirements(path: Path) -> Iterator[Requirement]:
    """The requirements of `path` and of the files it includes with `-r`."""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].split("\t#", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            yield from requirements(path.parent / line.split(None, 1)[1])
        elif not line.startswith("-"):
            yield Requirement(line)


def unmet(path: Path) -> list[str]:
    """Each requirement of `path` that is not installed, or installed at a version it excludes."""
    missing = []
    for requirement in requirements(path):
        try:
            installed = version(requirement.name)
        except PackageNotFoundError:
            missing.append(f"{requirement} (not installed)")
            continue
        if requirement.specifier and not requirement.specifier.contains(installed, prereleases=True):
            missing.append(f"{requirement} (installed: {installed})")
    return missing


def main(argv: list[str]) -> int:
    missing = unmet(Path(argv[0]))
    for line in missing:
        print(line)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
