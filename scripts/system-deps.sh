#!/usr/bin/env bash
# Installs the system packages aios-rl needs (bubblewrap for the shell sandbox, chromium for the browser
# environment, util-linux's prlimit/setpriv, and python3.X-venv when $PYTHON cannot create a venv) with
# apt-get when they are missing. Says exactly what to do when it cannot.
set -euo pipefail
# The browser environment launches /usr/bin/chromium itself (Playwright's executable_path), so only that counts.
has_chromium() { [ -x /usr/bin/chromium ]; }
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v prlimit >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
has_chromium || missing+=(chromium)
# Debian and Ubuntu ship a system Python's ensurepip (which `python -m venv` needs) in python3.X-venv.
venv_pkg=""
if [ -n "${PYTHON:-}" ]; then
  rc=0
  "$PYTHON" -c 'import importlib.util as u, sys; s = u.find_spec("ensurepip"); sys.exit(3 if s is None or s.origin is None else 0)' \
    >/dev/null 2>&1 || rc=$?
  if [ "$rc" -eq 3 ]; then
    venv_pkg="$("$PYTHON" -c 'import sys; print(f"python3.{sys.version_info.minor}-venv")')"
    missing+=("$venv_pkg")
  fi
fi
[ ${#missing[@]} -eq 0 ] && exit 0

yourself="install ${missing[*]} yourself (bubblewrap must give \`bwrap\` on PATH and chromium /usr/bin/chromium), then run make again"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "aios-rl: missing system packages: ${missing[*]}; apt-get not found." >&2
  echo "         Install them with your system's package manager: $yourself." >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "aios-rl: missing system packages: ${missing[*]}; cannot install them (not root and no passwordless sudo)." >&2
  echo "         Run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  echo "         then run make again." >&2
  exit 1
fi
echo "aios-rl: installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt() {
  "${sudo[@]}" apt-get "$@" || {
    echo "aios-rl: \`apt-get $1\` failed (its error is above); $yourself." >&2
    exit 1
  }
}
apt update -qq
apt install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for pkg in "${missing[@]}"; do
  case "$pkg" in
    bubblewrap) command -v bwrap >/dev/null 2>&1 || { echo "aios-rl: bubblewrap installed but \`bwrap\` is not on PATH" >&2; exit 1; } ;;
    util-linux) command -v prlimit >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1 \
      || { echo "aios-rl: util-linux installed but \`prlimit\` or \`setpriv\` is not on PATH" >&2; exit 1; } ;;
    chromium) has_chromium || { echo "aios-rl: chromium installed but /usr/bin/chromium is not there" >&2; exit 1; } ;;
  esac
done
echo "aios-rl: system packages ready"
