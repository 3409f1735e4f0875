#!/usr/bin/env bash
# SIMDe's headers (Debian's libsimde-dev), for the builds that emulate the
# AVX-512 kernels on AVX2 (CMake's MHSA_EMULATE_AVX512). Installs them if missing.
set -euo pipefail
if [ -f /usr/include/simde/x86/avx512.h ]; then exit 0; fi
echo "install-simde.sh: installing libsimde-dev from Debian's packages (AVX-512 emulated on AVX2)"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libsimde-dev >/dev/null
