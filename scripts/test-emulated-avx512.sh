#!/usr/bin/env bash
# The jest suite against an addon whose AVX-512 kernels are emulated on AVX2 by
# SIMDe (CMake's MHSA_EMULATE_AVX512), on a CPU without AVX-512: the table that
# such CPUs' users run, with every fixture and end-to-end test, where no
# AVX-512 hardware is at hand. Correctness only; the addon is never shipped.
#   npm run test:emulated-avx512
set -euo pipefail
cd "$(dirname "$0")/.."
# Whether this CPU runs mhsa's AVX-512 table natively (the flags detectCpuIsa
# checks), and whether it can run the emulated one (AVX2 and FMA).
cpu_has() { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -qw "$1"; }
runs_avx512() { cpu_has avx512f && cpu_has avx512vl && cpu_has avx512bw && cpu_has avx512dq && cpu_has fma; }
runs_avx2() { cpu_has avx2 && cpu_has fma; }
if runs_avx512 || ! runs_avx2; then
  echo "test-emulated-avx512.sh: this CPU runs the AVX-512 table natively (npm test covers it), or lacks AVX2 and FMA; nothing to do"
  exit 0
fi
bash scripts/install-simde.sh
out=build-emulated-avx512
npx cmake-js compile --out "$out" --CDMHSA_EMULATE_AVX512=ON >/dev/null
export MHSA_ADDON="$out/Release/mhsa.node"
isa=$(node -p "require('.').info().isa")
if [ "$isa" != avx512 ]; then
  echo "test-emulated-avx512.sh: expected the emulated addon to run the avx512 table but it runs $isa" >&2
  exit 1
fi
npx jest
