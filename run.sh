#!/usr/bin/env bash
# The two commands of this project (see README.md):
#   ./run.sh app    set up (venv + requirements, once) and start the workbench on http://127.0.0.1:8501
#   ./run.sh test   set up (dev requirements, Debian's chromium for the browser tests), lint with ruff, run the whole test suite
set -euo pipefail
cd "$(dirname "$0")"

VENV="${WORKBENCH_VENV:-.venv}"
PY="$VENV/bin/python"

setup_python() {
  # $1: the requirements file to install, requirements.txt (app) or requirements-dev.txt (tests,
  # lint; it includes requirements.txt).
  local reqs="$1"
  if [ ! -x "$PY" ]; then
    local base
    base="$(command -v python3.11 || command -v python3)"
    echo "creating virtualenv $VENV with $base" >&2
    "$base" -m venv "$VENV"
  fi
  # Reinstall only when requirements.txt, requirements-dev.txt or pyproject.toml changed since the
  # last successful install of this file (one stamp per file, so app and test runs do not undo
  # each other's). Then the project itself, editable and without resolving dependencies again
  # (they are the pinned ones just installed): `import retrieval`, `import ui` and the `retrieval`
  # command work from anywhere, with no sys.path edit.
  # When every requirement is met already (tools/requirements_met.py) and the venv imports this
  # checkout, nothing is installed: `./run.sh test` beside a running `./run.sh app` (one venv)
  # must not reinstall packages or the project under it; pip runs only for what is missing.
  # (`-I`: the installed project, not the current folder nor $PYTHONPATH, is what is imported.)
  local stamp="$VENV/.${reqs%.txt}.sha256" want
  want="$(cat requirements.txt requirements-dev.txt pyproject.toml | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] && "$PY" tools/requirements_met.py "$reqs" >/dev/null 2>&1 \
      && "$PY" -I -c 'import pathlib, sys, retrieval
sys.exit(pathlib.Path(retrieval.__file__).resolve().parents[1] != pathlib.Path(sys.argv[1]).resolve())' "$PWD" \
      2>/dev/null; then
    echo "$reqs: every requirement is installed already; nothing to install" >&2
    echo "$want" > "$stamp"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "installing $reqs (torch CPU build, streamlit, lancedb, models …) and the project; the first time takes a" \
         "few minutes, pip shows each package as it goes" >&2
    "$PY" -m pip install --disable-pip-version-check -r "$reqs" >&2
    "$PY" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
    echo "$want" > "$stamp"
  fi
  # The built-in models' files for this machine (E5's conversion, the int8 ONNX exports a CPU
  # runs), made now rather than at the first ingest, again after an install or a new export
  # format (which also deletes the old one's). A failure only warns: the files are then made at
  # first use, as before.
  local prepared="$VENV/.prepared.sha256" format
  format="$(grep -E '^FORMAT = ' retrieval/models/onnx_export.py)"
  if [ "$(cat "$prepared" 2>/dev/null)" != "$want $format" ]; then
    echo "making the built-in models' files for this machine (once, about a minute)" >&2
    if "$PY" -m retrieval prepare >&2; then
      echo "$want $format" > "$prepared"
    else
      echo "warning: could not make the model files now; they will be made at their first use" >&2
    fi
  fi
}

setup_chromium() {
  # Browser tests drive Debian's chromium; never a browser downloaded by playwright.
  if [ ! -x /usr/bin/chromium ]; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "installing Debian's chromium for the browser tests" >&2
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq chromium >/dev/null
  fi
}

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LANCEDB_LOG=error

case "${1:-}" in
  app)
    setup_python requirements.txt
    shift
    exec "$PY" -m streamlit run app.py "$@"
    ;;
  test)
    setup_python requirements-dev.txt
    setup_chromium
    shift
    # Lint first, then the tests even when lint fails (one run shows both); either failing fails.
    lint=0
    "$PY" -m ruff check . || lint=$?
    # Compiled modules (and pytest's rewritten test modules) are kept in __pycache__ (ignored by
    # git) even where the environment says not to write bytecode: otherwise every worker and every
    # process a test starts compiles them again (collection alone: ~15 s a worker instead of ~8).
    unset PYTHONDONTWRITEBYTECODE
    # Spread over the cores (pytest-xdist; scopes that share a fixture stay on one worker, see
    # tests/conftest.py). `./run.sh test -n 0` runs in this process, e.g. to debug.
    "$PY" -m pytest -q -n "${WORKBENCH_TEST_WORKERS:-auto}" --maxprocesses 4 --dist loadscope "$@" || exit $?
    exit "$lint"
    ;;
  *)
    echo "usage: ./run.sh app | test [pytest args]" >&2
    exit 2
    ;;
esac
