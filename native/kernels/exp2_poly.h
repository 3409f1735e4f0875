#pragma once
// The polynomial behind every ISA's exp2 for attention's column softmax:
// 2^r ≈ 1 + r·(c1 + r·(c2 + r·(c3 + r·(c4 + r·c5)))) for r in [-1/2, 1/2], a
// relative-error minimax fit (0.8 ulp in exact arithmetic; 2.04 ulp at worst
// evaluated in float by Horner's rule, measured over every float argument of
// the scores tile's exp). Constant term 1 exactly, so 2^0 = 1. Listed from
// the highest power down, in the order Horner's rule uses them.
namespace mhsa {
constexpr float kExp2Poly[] = {1.326472731307149e-3f, 9.671512991189957e-3f, 5.550733581185341e-2f,
                               2.4022242426872253e-1f, 6.931470036506653e-1f, 1.0f};
constexpr int kExp2PolyTerms = sizeof(kExp2Poly) / sizeof(kExp2Poly[0]);

// 2^-n as a float, for n in [0, 126].
constexpr float exp2Negative(int n) {
  float v = 1.0f;
  for (int i = 0; i < n; ++i) v *= 0.5f;
  return v;
}
}  // namespace mhsa
