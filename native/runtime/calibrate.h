// Measured machine limits: the FMA peak of this CPU (an unrolled loop of
// independent FMAs, the best any GEMM can do) and streaming memory bandwidth.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mhsa {

// GFLOP/s of fp32 FMAs on `threads` threads at once (each thread its own loop),
// the best of `reps` runs of `iters` iterations (16 FMAs of 16 lanes each).
double measureFmaPeakGflops(int threads, int64_t iters = 20'000'000, int reps = 3);

// GFLOP/s of bf16 products on the bf16 path (gemm_bf16.h's peakLoop: AMX
// tiles or VDPBF16PS) on `threads` threads, best of `reps`; 0 on the widening
// path, which has no bf16 arithmetic. `iters` scales with the FMA loop's.
double measureBf16PeakGflops(int threads, int64_t iters = 20'000'000, int reps = 3);

// GB/s of reading `bytes` (far larger than the caches) on `threads` threads, best of `reps`.
double measureReadBandwidthGBs(int threads, size_t bytes = size_t{512} << 20, int reps = 3);

}  // namespace mhsa
