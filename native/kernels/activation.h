// The activations a GEMM applies to each output after its bias, while the
// tile is still in L1 (GemmProblem::activation), as a transformer's MLP
// takes them: y = act(x·W + b), then + residual.
#pragma once

namespace mhsa {

enum class Activation : int {
  kNone = 0,
  kRelu = 1,      // max(x, 0); NaN stays NaN
  kGelu = 2,      // x·Φ(x) = 0.5·x·(1 + erf(x/√2)), PyTorch's GELU()
  kGeluTanh = 3,  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), PyTorch's GELU(approximate='tanh')
  kSilu = 4,      // x·sigmoid(x) = x / (1 + e^-x), PyTorch's SiLU()
};
constexpr int kActivationCount = 5;

}  // namespace mhsa
