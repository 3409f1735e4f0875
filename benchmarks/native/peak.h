// Measured machine limits: the FMA peak of this CPU (an unrolled loop of
// independent FMAs, the best any GEMM can do) and streaming memory bandwidth.
#pragma once

namespace mhsa {

// GFLOP/s of fp32 FMAs on `threads` threads at once (each thread its own loop).
double measureFmaPeakGflops(int threads);

// GB/s of reading a buffer far larger than the caches, on `threads` threads.
double measureReadBandwidthGBs(int threads);

}  // namespace mhsa
