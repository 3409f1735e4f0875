#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang + AddressSanitizer + UBSan) and fuzzes
# each for a bounded time, starting from its seed corpus: the native entry
# points' argument decoding (fuzz_calls) and the safetensors reader
# (fuzz_safetensors).
# clang and its runtime come from Debian's packages, installed here if missing.
#
#   npm run fuzz                          60 s per harness (what CI runs)
#   MHSA_FUZZ_SECONDS=3600 npm run fuzz   a long run
#   MHSA_FUZZ_MERGE=1 npm run fuzz        afterwards, fold new coverage into the seed corpus
#
# A crash, sanitizer report or hang (> 10 s on one input) fails the run and
# leaves the input in build-fuzz/artifacts/. Add it to native/fuzz/regressions/<calls|safetensors>/
# once fixed: ctest replays those folders under the sanitizers from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${MHSA_FUZZ_SECONDS:-60}"
clang_version=14

if ! command -v "clang++-$clang_version" >/dev/null 2>&1 ||
   [ ! -d "/usr/lib/llvm-$clang_version/lib/clang" ] ||
   ! ls /usr/lib/llvm-$clang_version/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: installing clang-$clang_version and libclang-rt-$clang_version-dev from Debian's packages"
  bash scripts/apt-install.sh "clang-$clang_version" "libclang-rt-$clang_version-dev"
fi

build_dir=build-fuzz
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
CXX="clang++-$clang_version" cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMHSA_BUILD_ADDON=OFF -DMHSA_BUILD_FUZZERS=ON -DMHSA_SANITIZE="address;undefined" >/dev/null
cmake --build "$build_dir" --parallel --target fuzz_calls fuzz_safetensors
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p "$build_dir/artifacts"

# fuzz <harness> <corpus name> <max input bytes> [extra libFuzzer flags...]
# Fuzzes into a scratch copy of the seed corpus, so a run never rewrites the
# committed one; regressions/<corpus name> (when present) is read too.
fuzz() {
  local harness=$1 name=$2 max_len=$3
  shift 3
  local work="$build_dir/corpus-run-$name" log="$build_dir/fuzz-$name.log" extra_dirs=()
  rm -rf "$work"
  mkdir -p "$work"
  cp native/fuzz/corpus/"$name"/* "$work/"
  if [ -d "native/fuzz/regressions/$name" ]; then extra_dirs+=("native/fuzz/regressions/$name"); fi
  echo "fuzz.sh: $harness for ${seconds} s"
  set +e
  "$build_dir/native/fuzz/$harness" "$work" "${extra_dirs[@]}" "$@" \
    -max_total_time="$seconds" -timeout=10 -max_len="$max_len" -rss_limit_mb=2048 \
    -artifact_prefix="$build_dir/artifacts/$name-" -print_final_stats=1 >"$log" 2>&1
  local status=$?
  set -e
  # The run's summary and any sanitizer report, without the per-input progress lines.
  grep -vE '^#[0-9]+\s+(NEW|REDUCE|pulse)|^"|Uses: ' "$log" | tail -40
  if [ "$status" -ne 0 ] || ls "$build_dir"/artifacts/"$name"-* >/dev/null 2>&1; then
    echo "fuzz.sh: $harness FAILED (exit $status); full log $log; inputs in $build_dir/artifacts/:"
    ls "$build_dir"/artifacts/ || true
    exit 1
  fi
  if [ "${MHSA_FUZZ_MERGE:-0}" = 1 ]; then
    "$build_dir/native/fuzz/$harness" -merge=1 native/fuzz/corpus/"$name" "$work" 2>&1 | tail -1
  fi
}

rm -f "$build_dir"/artifacts/*
fuzz fuzz_calls calls 512
fuzz fuzz_safetensors safetensors 4096 -dict=native/fuzz/safetensors.dict
echo "fuzz.sh: no crash in ${seconds} s per harness"
