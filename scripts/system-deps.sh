#!/usr/bin/env bash
# Installs the system packages aios-rl needs (bubblewrap for the shell sandbox, chromium for the browser
# environment) with apt-get when they are missing. Says exactly what to do when it cannot.
set -euo pipefail
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v prlimit >/dev/null 2>&1 && command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "aios-rl: installing system packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "aios-rl: cannot install ${missing[*]} (not root and no passwordless sudo)." >&2
  echo "         Run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "aios-rl: apt-get not found; install ${missing[*]} with your system's package manager." >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for pkg in "${missing[@]}"; do
  case "$pkg" in
    bubblewrap) command -v bwrap >/dev/null || { echo "aios-rl: bubblewrap did not install" >&2; exit 1; } ;;
    chromium) [ -x /usr/bin/chromium ] || { echo "aios-rl: chromium did not install" >&2; exit 1; } ;;
  esac
done
echo "aios-rl: system packages ready"
