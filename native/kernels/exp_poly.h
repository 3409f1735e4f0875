#pragma once
// The natural exp of softmax's rows, shared by every ISA (expApprox in
// portable_kernels.inc, the intrinsics in softmax_avx2.cc and
// softmax_avx512.cc): x = n·ln2 + r with |r| <= ln2/2, ln2 in two parts so
// that n·kLn2Hi is exact (kLn2Hi has 9 significant bits, |n| at most 8), and
// exp(r) ≈ 1 + r + r²·q(r) with q of degree 5 (Cephes' expf coefficients),
// listed from the highest power down, in the order Horner's rule uses them.
namespace mhsa {
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
// Below this, exp(x) is denormal: the kernels return 0.
constexpr float kExpMinArg = -87.33654475f;
constexpr float kExpPolyQ[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                               4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
constexpr int kExpPolyQTerms = sizeof(kExpPolyQ) / sizeof(kExpPolyQ[0]);
}  // namespace mhsa
