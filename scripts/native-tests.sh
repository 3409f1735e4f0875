#!/usr/bin/env bash
# Builds the native test runner (no Node needed) with AddressSanitizer,
# LeakSanitizer and UndefinedBehaviorSanitizer, and runs it under ctest once
# per ISA path. Uses the system C++ compiler (g++ on a fresh machine).
#   npm run test:native            sanitized build in build-native/
#   MHSA_SANITIZE= npm run test:native   plain optimized build (faster)
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize="${MHSA_SANITIZE-address;undefined}"
build_dir="${MHSA_NATIVE_BUILD_DIR:-build-native}"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMHSA_BUILD_ADDON=OFF -DMHSA_BUILD_TESTS=ON -DMHSA_SANITIZE="$sanitize" >/dev/null
cmake --build "$build_dir" --parallel
# halt_on_error: the first ASan report fails the run; detect_leaks: LSan at exit.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --test-dir "$build_dir" --output-on-failure

# On a CPU without AVX-512, ctest above reports native_avx512 as skipped. The
# AVX-512 kernels still ship (runtime dispatch picks them on AVX-512 CPUs), so
# they are tested here on AVX2 with their intrinsics emulated by SIMDe
# (CMake's MHSA_EMULATE_AVX512; correctness only, never speed).
source scripts/emulated-avx512.sh
if emulated_avx512_needed; then
  ensure_simde
  emulated_dir="${build_dir}-emulated-avx512"
  cmake -S . -B "$emulated_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMHSA_BUILD_ADDON=OFF -DMHSA_BUILD_TESTS=ON -DMHSA_EMULATE_AVX512=ON -DMHSA_SANITIZE="$sanitize" >/dev/null
  cmake --build "$emulated_dir" --parallel
  # The AVX-512 table's own run, and the fuzz regressions (which run the CPU's best table: here, the emulated one).
  ctest --test-dir "$emulated_dir" --output-on-failure -R 'native_avx512|fuzz'
fi
