#include "../formats/safetensors.h"
#include "args.h"
#include "async_job.h"
#include "bindings.h"

namespace mhsa {

Napi::Value parseSafetensorsBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const JsBuffer bytes = optionalByteArg(info[0], "loadSafetensors", "source");
  if (!bytes.arg.present) throw Napi::TypeError::New(env, "loadSafetensors: source must be a Uint8Array");
  SafetensorsHeader header;
  const Status st = parseSafetensors(static_cast<const uint8_t*>(bytes.arg.data),
                                     static_cast<size_t>(bytes.arg.length), &header);
  Napi::Object r = Napi::Object::New(env);
  if (!st.ok()) {
    r.Set("errorKind", st.kind == Status::Kind::Type ? "TypeError" : "RangeError");
    r.Set("message", st.message);
    return r;
  }
  r.Set("dataStart", static_cast<double>(header.dataStart));
  Napi::Array entries = Napi::Array::New(env, header.entries.size());
  for (size_t i = 0; i < header.entries.size(); ++i) {
    const SafetensorsEntry& e = header.entries[i];
    Napi::Array shape = Napi::Array::New(env, e.shape.size());
    for (size_t d = 0; d < e.shape.size(); ++d) shape.Set(static_cast<uint32_t>(d), static_cast<double>(e.shape[d]));
    Napi::Array entry = Napi::Array::New(env, 5);
    entry.Set(0u, e.name);
    entry.Set(1u, e.dtype);
    entry.Set(2u, shape);
    entry.Set(3u, static_cast<double>(e.begin));
    entry.Set(4u, static_cast<double>(e.end));
    entries.Set(static_cast<uint32_t>(i), entry);
  }
  r.Set("entries", entries);
  Napi::Array metadata = Napi::Array::New(env, header.metadata.size());
  for (size_t i = 0; i < header.metadata.size(); ++i) {
    Napi::Array pair = Napi::Array::New(env, 2);
    pair.Set(0u, header.metadata[i].first);
    pair.Set(1u, header.metadata[i].second);
    metadata.Set(static_cast<uint32_t>(i), pair);
  }
  r.Set("metadata", metadata);
  return r;
}

Napi::Value decodeHalfBinding(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "loadSafetensors";
  const JsBuffer src = optionalByteArg(info[0], fn, "source bytes");
  const JsBuffer out = floatArg(info[1], fn, "out");
  if (!src.arg.present) throw Napi::TypeError::New(env, "loadSafetensors: source bytes must be a Uint8Array");
  if (src.arg.length != 2 * out.arg.length)
    throw Napi::RangeError::New(env, "loadSafetensors: expected 2 source bytes per decoded element");
  const auto* bytes = static_cast<const uint8_t*>(src.arg.data);
  const size_t count = out.arg.length;
  float* dst = out.arg.mutableFloats();
  const bool bf16 = info[2].ToBoolean().Value();
  // Synchronous, or queued when info[3] is a callback (loadSafetensorsAsync).
  runOrSubmit(fn, info, 3, JobBuffers{{src.value}, {out.value}}, [bytes, count, dst, bf16] {
    if (bf16)
      decodeBF16(bytes, count, dst);
    else
      decodeF16(bytes, count, dst);
  });
  return env.Undefined();
}

}  // namespace mhsa
