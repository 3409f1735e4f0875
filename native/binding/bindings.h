// The native entry points, one file per op family. Each takes positional
// arguments already validated by lib/ and, when its last argument is a
// function, runs asynchronously and calls it with (error | null).
#pragma once

#include <napi.h>

namespace mhsa {

// matmul(a, aShape, b, bShape, c|null, cShape|null, out, outShape,
//        transposeA, transposeB, alpha, beta, callback?)
Napi::Value matmulBinding(const Napi::CallbackInfo& info);

// softmax(x, xShape, out, outShape, scale, callback?)
Napi::Value softmaxBinding(const Napi::CallbackInfo& info);

// attention(layout, q, qShape, k, kShape, v, vShape, out, outShape,
//           scale|null, causal, mask|null, maskShape|null, keyPaddingMask|null,
//           weights|null, callback?)
Napi::Value attentionBinding(const Napi::CallbackInfo& info);

}  // namespace mhsa
