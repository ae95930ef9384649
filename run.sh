#!/usr/bin/env bash
# The two commands of this project (see README.md):
#   ./run.sh app    set up (venv + requirements, once) and start the workbench on http://127.0.0.1:8501
#   ./run.sh test   set up (also Debian's chromium for the browser tests) and run the whole test suite
set -euo pipefail
cd "$(dirname "$0")"

VENV="${WORKBENCH_VENV:-.venv}"
PY="$VENV/bin/python"

setup_python() {
  if [ ! -x "$PY" ]; then
    local base
    base="$(command -v python3.11 || command -v python3)"
    echo "creating virtualenv $VENV with $base" >&2
    "$base" -m venv "$VENV"
  fi
  # Reinstall only when requirements.txt changed since the last successful install.
  local stamp="$VENV/.requirements.sha256" want
  want="$(sha256sum requirements.txt | cut -d' ' -f1)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "installing requirements (torch CPU build, streamlit, lancedb, models …)" >&2
    "$PY" -m pip install --quiet --disable-pip-version-check -r requirements.txt
    echo "$want" > "$stamp"
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
    setup_python
    shift
    exec "$PY" -m streamlit run app.py "$@"
    ;;
  test)
    setup_python
    setup_chromium
    shift
    exec "$PY" -m pytest -q "$@"
    ;;
  *)
    echo "usage: ./run.sh app | test [pytest args]" >&2
    exit 2
    ;;
esac
