#!/usr/bin/env bash
# Builds and runs the native GEMM benchmark (no Node involved) against OpenBLAS
# when its development files are installed (apt-get install libopenblas-dev).
# Usage: benchmarks/native/run.sh [min-seconds-per-shape]   (env SHAPES=g_sq1024,g_qkv197 to filter)
# BENCH=block: the ViT block's stages and attention's layouts instead
# (block_bench.cc; its argument is the seconds per group of variants).
# BENCH=tile: attention's scores tile against the GEMM tile, one thread, in L1
# (tile_bench.cc; its arguments are the depth and the tile's rows).
# BENCH=pipes: which AVX-512 operations compete with FMAs for issue
# (pipe_bench.cc, on its own: it needs no kernels).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/build-bench"
mkdir -p "$out"
cd "$root"
if [ "${BENCH:-gemm}" = pipes ]; then
  g++ -O3 -std=c++17 -mavx512f -mavx512dq benchmarks/native/pipe_bench.cc -o "$out/pipe_bench"
  exec "$out/pipe_bench"
fi
core=$(node -p "require('./native/sources.json').core.join(' ')")
avx2=$(node -p "require('./native/sources.json').avx2.join(' ')")
avx512=$(node -p "require('./native/sources.json').avx512.join(' ')")
avx512bf16=$(node -p "require('./native/sources.json').avx512bf16.join(' ')")
amx=$(node -p "require('./native/sources.json').amx.join(' ')")
flags="-O3 -std=c++17 -ffp-contract=off -DMHSA_HAVE_X86_KERNELS -pthread"
objs=()
for f in $core benchmarks/native/gemm_bench.cc benchmarks/native/block_bench.cc benchmarks/native/tile_bench.cc; do
  o="$out/$(basename "$f" .cc).o"; g++ $flags -c "$f" -o "$o" & objs+=("$o")
done
for f in $avx2; do o="$out/$(basename "$f" .cc).o"; g++ $flags -mavx2 -mfma -c "$f" -o "$o" & objs+=("$o"); done
for f in $avx512; do
  o="$out/$(basename "$f" .cc).o"
  g++ $flags -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma -mprefer-vector-width=512 -c "$f" -o "$o" & objs+=("$o")
done
for f in $avx512bf16; do
  o="$out/$(basename "$f" .cc).o"
  g++ $flags -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma -mavx512bf16 -mprefer-vector-width=512 -c "$f" -o "$o" & objs+=("$o")
done
for f in $amx; do
  o="$out/$(basename "$f" .cc).o"
  g++ $flags -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma -mamx-tile -mamx-bf16 -c "$f" -o "$o" & objs+=("$o")
done
wait
libs=""
if pkg-config --exists openblas 2>/dev/null; then
  g++ $flags -DMHSA_BENCH_OPENBLAS $(pkg-config --cflags openblas) -c benchmarks/native/gemm_bench.cc -o "$out/gemm_bench.o"
  libs="$(pkg-config --libs openblas)"
fi
# Everything but the two mains, then each main.
common=()
for o in "${objs[@]}"; do case "$o" in *_bench.o) ;; *) common+=("$o") ;; esac; done
if [ "${BENCH:-gemm}" = block ]; then
  g++ -pthread "${common[@]}" "$out/block_bench.o" -o "$out/block_bench"
  exec "$out/block_bench" "${1:-5}"
fi
if [ "${BENCH:-gemm}" = tile ]; then
  g++ -pthread "${common[@]}" "$out/tile_bench.o" -o "$out/tile_bench"
  exec "$out/tile_bench" "$@"
fi
g++ -pthread "${common[@]}" "$out/gemm_bench.o" $libs -o "$out/gemm_bench"
"$out/gemm_bench" "${1:-0.5}"
