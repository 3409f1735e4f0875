#include "call_args.h"

#include <string>

namespace mhsa {

Status checkNoOverlap(const char* fn, const char* outName, const BufferArg& out, int64_t outElementBytes,
                      const char* inName, const BufferArg& in, int64_t inElementBytes, bool allowSame) {
  if (out.data == nullptr || in.data == nullptr || out.length == 0 || in.length == 0) return Status::success();
  const auto o = reinterpret_cast<uintptr_t>(out.data);
  const auto i = reinterpret_cast<uintptr_t>(in.data);
  const auto outBytes = static_cast<uintptr_t>(out.length * outElementBytes);
  const auto inBytes = static_cast<uintptr_t>(in.length * inElementBytes);
  if (allowSame && o == i && outBytes == inBytes) return Status::success();
  if (o < i + inBytes && i < o + outBytes)
    return Status::rangeError(std::string(fn) + ": " + outName + " must not share memory with " + inName);
  return Status::success();
}

}  // namespace mhsa
