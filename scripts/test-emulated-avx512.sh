#!/usr/bin/env bash
# The jest suite against an addon whose AVX-512 kernels are emulated on AVX2 by
# SIMDe (CMake's MHSA_EMULATE_AVX512), on a CPU without AVX-512: the table that
# such CPUs' users run, with every fixture and end-to-end test, where no
# AVX-512 hardware is at hand. Correctness only; the addon is never shipped.
#   npm run test:emulated-avx512
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/emulated-avx512.sh
if ! emulated_avx512_needed; then
  echo "test-emulated-avx512.sh: this CPU runs the AVX-512 table natively (npm test covers it), or lacks AVX2 and FMA; nothing to do"
  exit 0
fi
ensure_simde
out=build-emulated-avx512
npx cmake-js compile --out "$out" --CDMHSA_EMULATE_AVX512=ON >/dev/null
export MHSA_ADDON="$out/Release/mhsa.node"
isa=$(node -p "require('.').info().isa")
if [ "$isa" != avx512 ]; then
  echo "test-emulated-avx512.sh: expected the emulated addon to run the avx512 table but it runs $isa" >&2
  exit 1
fi
npx jest
