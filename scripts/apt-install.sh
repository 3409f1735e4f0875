#!/usr/bin/env bash
# Installs Debian packages for the scripts that need a tool the machine may
# lack (clang for fuzzing, the arm64 cross compiler, SIMDe): through sudo
# unless already root, quietly, without recommends.
#   bash scripts/apt-install.sh <package>...
set -euo pipefail
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
