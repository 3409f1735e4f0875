#!/usr/bin/env bash
# Builds the libFuzzer harness (clang + AddressSanitizer + UBSan) and fuzzes
# the native entry points for a bounded time, starting from the seed corpus.
# clang and its runtime come from Debian's packages, installed here if missing.
#
#   npm run fuzz                          60 s (what CI runs)
#   MHSA_FUZZ_SECONDS=3600 npm run fuzz   a long run
#   MHSA_FUZZ_MERGE=1 npm run fuzz        afterwards, fold new coverage into the seed corpus
#
# A crash, sanitizer report or hang (> 10 s on one input) fails the run and
# leaves the input in build-fuzz/artifacts/. Add it to native/fuzz/regressions/
# once fixed: ctest replays that folder under the sanitizers from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${MHSA_FUZZ_SECONDS:-60}"
clang_version=14

if ! command -v "clang++-$clang_version" >/dev/null 2>&1 ||
   [ ! -d "/usr/lib/llvm-$clang_version/lib/clang" ] ||
   ! ls /usr/lib/llvm-$clang_version/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: installing clang-$clang_version and libclang-rt-$clang_version-dev from Debian's packages"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "clang-$clang_version" "libclang-rt-$clang_version-dev" >/dev/null
fi

build_dir=build-fuzz
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
CXX="clang++-$clang_version" cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMHSA_BUILD_ADDON=OFF -DMHSA_BUILD_FUZZERS=ON -DMHSA_SANITIZE="address;undefined" >/dev/null
cmake --build "$build_dir" --parallel --target fuzz_calls

# Fuzz into a scratch copy so a run never rewrites the committed corpus.
work="$build_dir/corpus-run"
rm -rf "$work"
mkdir -p "$work" "$build_dir/artifacts"
cp native/fuzz/corpus/calls/* "$work/"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
log="$build_dir/fuzz.log"
set +e
"$build_dir/native/fuzz/fuzz_calls" "$work" native/fuzz/regressions \
  -max_total_time="$seconds" -timeout=10 -max_len=512 -rss_limit_mb=2048 \
  -artifact_prefix="$build_dir/artifacts/" -print_final_stats=1 >"$log" 2>&1
status=$?
set -e
# The run's summary and any sanitizer report, without the per-input progress lines.
grep -vE '^#[0-9]+\s+(NEW|REDUCE|pulse)|^"|Uses: ' "$log" | tail -60
if [ "$status" -ne 0 ] || ls "$build_dir"/artifacts/* >/dev/null 2>&1; then
  echo "fuzz.sh: FAILED (exit $status); full log $log; inputs in $build_dir/artifacts/:"
  ls "$build_dir"/artifacts/ || true
  exit 1
fi
if [ "${MHSA_FUZZ_MERGE:-0}" = 1 ]; then
  "$build_dir/native/fuzz/fuzz_calls" -merge=1 native/fuzz/corpus/calls "$work" 2>&1 | tail -1
fi
echo "fuzz.sh: no crash in ${seconds} s"
