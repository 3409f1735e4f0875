#!/usr/bin/env bash
# Builds the native test runner for arm64 (the portable kernels, which GCC
# vectorizes for NEON) with Debian's cross compiler and runs it under
# qemu-user: a check that the code builds and computes correctly on arm64,
# not a measure of its speed. Installs g++-aarch64-linux-gnu and qemu-user
# from Debian's packages when missing.
#   bash scripts/cross-arm64.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || ! command -v qemu-aarch64 >/dev/null 2>&1; then
  bash scripts/apt-install.sh g++-aarch64-linux-gnu qemu-user
fi
build_dir=build-arm64
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.toolchain.cmake \
  -DCMAKE_BUILD_TYPE=Release -DMHSA_BUILD_ADDON=OFF -DMHSA_BUILD_TESTS=ON >/dev/null
cmake --build "$build_dir" --parallel
ctest --test-dir "$build_dir" --output-on-failure
