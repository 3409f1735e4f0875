#include "gemm_blas.h"

#include <algorithm>
#include <climits>
#include <mutex>

#include "../runtime/thread_pool.h"

#ifdef MHSA_BLAS
// The CBLAS and OpenBLAS entry points, declared here so the build needs the
// library only, not a particular cblas.h (FindBLAS does not report one).
extern "C" {
void cblas_sgemm(int order, int transA, int transB, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
void openblas_set_num_threads(int threads);
}
#endif

namespace mhsa {

#ifdef MHSA_BLAS

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

// A stored matrix of `rows` x `cols` as CBLAS sees it: row-major, either as is
// (NoTrans, leading dim = row stride) or as the transpose of a row-major one.
bool asCblas(const StridedMatrix& x, int64_t rows, int64_t cols, int* trans, int64_t* ld) {
  if (x.colStride == 1 && (rows <= 1 || x.rowStride >= cols)) {
    *trans = kNoTrans;
    *ld = std::max<int64_t>(rows <= 1 ? cols : x.rowStride, 1);  // CBLAS wants ld >= max(1, cols)
    return true;
  }
  if (x.rowStride == 1 && (cols <= 1 || x.colStride >= rows)) {
    *trans = kTrans;
    *ld = std::max<int64_t>(cols <= 1 ? rows : x.colStride, 1);
    return true;
  }
  return false;
}

}  // namespace

const char* systemBlasName() { return MHSA_BLAS; }

bool systemBlasGemm(const GemmProblem& p) {
  if (p.packedB != nullptr || p.aLayerNorm != nullptr || p.outColStride != 1 || p.outRowStride < p.n) return false;
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX || p.outRowStride > INT_MAX) return false;
  int transA, transB;
  int64_t lda, ldb;
  if (!asCblas(p.a, p.m, p.k, &transA, &lda) || !asCblas(p.b, p.k, p.n, &transB, &ldb)) return false;
  if (lda > INT_MAX || ldb > INT_MAX) return false;
  // One BLAS call at a time: OpenBLAS's thread count is process-wide and must
  // not change under a running call, and each call already uses every thread.
  // A caller that finds BLAS busy uses the built-in kernels instead of waiting,
  // as a caller that finds the pool busy computes alone.
  static std::mutex blasMutex;
  static int threadsSet = 0;  // guarded by blasMutex
  std::unique_lock<std::mutex> lock(blasMutex, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  if (threadsSet != numThreads()) {
    threadsSet = numThreads();
    openblas_set_num_threads(threadsSet);
  }
  cblas_sgemm(kRowMajor, transA, transB, static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k),
              p.alpha, p.a.data, static_cast<int>(lda), p.b.data, static_cast<int>(ldb), p.accumulate ? 1.0f : 0.0f,
              p.out, static_cast<int>(p.outRowStride));
  return true;
}

#else

const char* systemBlasName() { return nullptr; }
bool systemBlasGemm(const GemmProblem&) { return false; }

#endif

}  // namespace mhsa
