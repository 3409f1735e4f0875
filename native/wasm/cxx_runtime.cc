// The parts of the C++ runtime that the WebAssembly build's libc++abi lacks
// or builds without exceptions (docs/design/wasm.md): exceptions, operator
// new, and thread_local destructors.
//
// clang's -fwasm-exceptions compiles throw and catch to WebAssembly's own
// exception instructions, which every Node this package supports runs. The
// runtime those instructions call (__cxa_throw, the personality routine,
// __cxa_begin_catch, ...) normally comes from libc++abi and libunwind, but the
// wasm32-wasi libc++abi that Debian ships is built without exceptions. This
// file is that runtime, for one thread (the wasm build has no threads):
//
// - A thrown object sits after a Header, 16-byte aligned. The value that the
//   wasm `throw` carries, and that compiled catch blocks hand back to the
//   functions here, is the Header's address.
// - A catch block stores its landing-pad index and its function's LSDA in
//   __wasm_lpad_context, then calls _Unwind_CallPersonality, which finds the
//   first catch clause whose type matches and writes its type index as the
//   selector the compiled code compares. Wasm unwinds one frame at a time, so
//   there is no separate search phase.
// - Types match through libc++abi's own __shim_type_info::can_catch, which the
//   Debian library does contain (dynamic_cast needs the same type data).
//
// The LSDA layout is the Itanium one that clang emits for wasm, with the call-site
// table indexed by landing pad (as in SjLj), not by code address.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <typeinfo>

namespace __cxxabiv1 {
// The layout of libc++abi's private base of every type_info: the vtable
// slots after type_info's destructor. Only declared, so the calls below go
// through the real vtables of the type_info objects the compiler emitted.
class __shim_type_info : public std::type_info {
 public:
  ~__shim_type_info() override;
  virtual void noop1() const;
  virtual void noop2() const;
  virtual bool can_catch(const __shim_type_info* thrown, void*& adjusted) const = 0;
};
}  // namespace __cxxabiv1

namespace {

using TypeInfo = __cxxabiv1::__shim_type_info;

struct Header {
  const std::type_info* type;
  void* (*destroy)(void*);  // wasm's C++ ABI: a destructor returns `this`
  Header* nextCaught;  // the stack of exceptions being handled
  Header* primary;     // set for a rethrown exception_ptr: the exception it refers to
  int handlers;        // catch blocks running on it; negated while it is rethrown from one
  int refs;            // one for the throw (or the catch that holds it), one per exception_ptr
  void* adjusted;      // the object as the matched catch clause sees it (a base subobject)
};

constexpr size_t kHeaderBytes = (sizeof(Header) + 15) & ~size_t{15};

void* objectOf(Header* h) { return reinterpret_cast<char*>(h) + kHeaderBytes; }
Header* headerOf(void* object) { return reinterpret_cast<Header*>(static_cast<char*>(object) - kHeaderBytes); }
// The object a header throws: its own, or, for a rethrown exception_ptr, the primary's.
void* thrownObject(Header* h) { return h->primary != nullptr ? objectOf(h->primary) : objectOf(h); }

Header* caughtStack = nullptr;
unsigned uncaughtCount = 0;

Header* allocateHeader(size_t objectBytes) {
  const size_t bytes = (kHeaderBytes + objectBytes + 15) & ~size_t{15};
  void* memory = std::aligned_alloc(16, bytes);
  if (memory == nullptr) std::terminate();  // no memory left even to report that
  std::memset(memory, 0, kHeaderBytes);
  return static_cast<Header*>(memory);
}

void release(Header* h) {
  if (--h->refs > 0) return;
  if (h->primary != nullptr)
    release(h->primary);
  else if (h->destroy != nullptr)
    h->destroy(objectOf(h));
  std::free(h);
}

[[noreturn]] void raise(Header* h) {
  ++uncaughtCount;
  __builtin_wasm_throw(0, h);
}

// DWARF exception-header encodings (the low nibble is the format, the high one how it applies).
enum : uint8_t {
  kAbsPtr = 0x00, kULeb128 = 0x01, kUData2 = 0x02, kUData4 = 0x03, kUData8 = 0x04,
  kSLeb128 = 0x09, kSData2 = 0x0a, kSData4 = 0x0b, kSData8 = 0x0c,
  kPcRel = 0x10, kIndirect = 0x80, kOmit = 0xff,
};

// A LEB128 number; a signed one is sign-extended from its last byte's bit 6.
uintptr_t readLeb(const uint8_t** p, bool isSigned) {
  uintptr_t value = 0;
  unsigned shift = 0;
  uint8_t byte;
  do {
    byte = *(*p)++;
    value |= static_cast<uintptr_t>(byte & 0x7f) << shift;
    shift += 7;
  } while (byte & 0x80);
  if (isSigned && (byte & 0x40) && shift < sizeof(value) * 8) value |= ~uintptr_t{0} << shift;
  return value;
}

uintptr_t readULeb(const uint8_t** p) { return readLeb(p, false); }
intptr_t readSLeb(const uint8_t** p) { return static_cast<intptr_t>(readLeb(p, true)); }

template <typename T>
uintptr_t readRaw(const uint8_t** p) {
  T v;
  std::memcpy(&v, *p, sizeof(T));
  *p += sizeof(T);
  return static_cast<uintptr_t>(v);
}

uintptr_t readEncoded(const uint8_t** p, uint8_t encoding) {
  if (encoding == kOmit) return 0;
  const uint8_t* start = *p;
  uintptr_t v;
  switch (encoding & 0x0f) {
    case kAbsPtr: v = readRaw<uintptr_t>(p); break;
    case kULeb128: v = readULeb(p); break;
    case kSLeb128: v = static_cast<uintptr_t>(readSLeb(p)); break;
    case kUData2: v = readRaw<uint16_t>(p); break;
    case kSData2: v = readRaw<int16_t>(p); break;
    case kUData4: v = readRaw<uint32_t>(p); break;
    case kSData4: v = readRaw<int32_t>(p); break;
    case kUData8: v = readRaw<uint64_t>(p); break;
    case kSData8: v = readRaw<int64_t>(p); break;
    default: std::terminate();
  }
  switch (encoding & 0x70) {
    case 0: break;
    case kPcRel: v += reinterpret_cast<uintptr_t>(start); break;
    default: std::terminate();  // text-, data- and function-relative forms: not emitted for wasm
  }
  if (v != 0 && (encoding & kIndirect)) v = *reinterpret_cast<const uintptr_t*>(v);
  return v;
}

size_t encodedSize(uint8_t encoding) {
  switch (encoding & 0x0f) {
    case kAbsPtr: return sizeof(uintptr_t);
    case kUData2: case kSData2: return 2;
    case kUData4: case kSData4: return 4;
    case kUData8: case kSData8: return 8;
    default: std::terminate();  // a type table needs fixed-size entries
  }
}

}  // namespace

// The tag every C++ throw carries: a wasm exception with one i32, the Header's address.
__asm__(".globl __cpp_exception\n.tagtype __cpp_exception i32\n__cpp_exception:\n");

extern "C" {

// Written by compiled catch blocks before they call _Unwind_CallPersonality
// (LLVM's WasmEHPrepare); thread_local to match their declaration.
struct LandingPadContext {
  uintptr_t lpadIndex;
  uintptr_t lsda;
  uintptr_t selector;
};
thread_local LandingPadContext __wasm_lpad_context;

enum { kHandlerFound = 6, kContinueUnwind = 8 };

// Sets __wasm_lpad_context.selector to the type index of the first catch
// clause of the current landing pad that matches exn (0: none; the compiled
// code then runs cleanups and rethrows).
int _Unwind_CallPersonality(void* exn) {
  Header* h = static_cast<Header*>(exn);
  __wasm_lpad_context.selector = 0;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(__wasm_lpad_context.lsda);
  if (p == nullptr) return kContinueUnwind;
  const uint8_t lpStartEncoding = *p++;
  readEncoded(&p, lpStartEncoding);  // wasm landing pads are indices: the base is unused
  const uint8_t typeEncoding = *p++;
  const uint8_t* typeTable = nullptr;
  if (typeEncoding != kOmit) {
    const uintptr_t offset = readULeb(&p);
    typeTable = p + offset;
  }
  ++p;  // the call-site encoding: wasm's entries are always ULEB128
  const uintptr_t callSiteBytes = readULeb(&p);
  const uint8_t* const actions = p + callSiteBytes;
  uintptr_t action = 0;
  for (uintptr_t index = 0; p < actions; ++index) {
    readULeb(&p);  // the landing pad: implied by the index
    const uintptr_t entry = readULeb(&p);
    if (index == __wasm_lpad_context.lpadIndex) {
      action = entry;
      break;
    }
  }
  if (action == 0) return kContinueUnwind;  // cleanups only
  const TypeInfo* thrownType = static_cast<const TypeInfo*>(h->type);
  const uint8_t* a = actions + (action - 1);
  for (;;) {
    const intptr_t typeIndex = readSLeb(&a);
    if (typeIndex > 0) {
      const uint8_t* slot = typeTable - static_cast<uintptr_t>(typeIndex) * encodedSize(typeEncoding);
      const TypeInfo* catchType = reinterpret_cast<const TypeInfo*>(readEncoded(&slot, typeEncoding));
      void* adjusted = thrownObject(h);
      if (catchType == nullptr || catchType->can_catch(thrownType, adjusted)) {
        h->adjusted = adjusted;
        __wasm_lpad_context.selector = static_cast<uintptr_t>(typeIndex);
        return kHandlerFound;
      }
    }
    // typeIndex 0 is a cleanup and < 0 an exception specification: clang
    // implements noexcept with terminate pads, and this code has no throw().
    const uint8_t* next = a;
    const intptr_t offset = readSLeb(&next);
    if (offset == 0) return kContinueUnwind;
    a += offset;
  }
}

void* __cxa_allocate_exception(size_t bytes) noexcept { return objectOf(allocateHeader(bytes)); }

void __cxa_free_exception(void* object) noexcept { std::free(headerOf(object)); }

[[noreturn]] void __cxa_throw(void* object, std::type_info* type, void* (*destroy)(void*)) {
  Header* h = headerOf(object);
  h->type = type;
  h->destroy = destroy;
  h->refs = 1;
  h->adjusted = object;
  raise(h);
}

void* __cxa_get_exception_ptr(void* exn) noexcept { return static_cast<Header*>(exn)->adjusted; }

void* __cxa_begin_catch(void* exn) noexcept {
  Header* h = static_cast<Header*>(exn);
  h->handlers = h->handlers < 0 ? -h->handlers + 1 : h->handlers + 1;
  if (h != caughtStack) {
    h->nextCaught = caughtStack;
    caughtStack = h;
  }
  if (uncaughtCount > 0) --uncaughtCount;
  return h->adjusted;
}

void __cxa_end_catch() {
  Header* h = caughtStack;
  if (h == nullptr) return;
  if (h->handlers < 0) {
    // Rethrown from this catch block: it is in flight again, owned by the throw.
    if (++h->handlers == 0) caughtStack = h->nextCaught;
  } else if (--h->handlers == 0) {
    caughtStack = h->nextCaught;
    release(h);
  }
}

[[noreturn]] void __cxa_rethrow() {
  Header* h = caughtStack;
  if (h == nullptr) std::terminate();
  h->handlers = -h->handlers;
  raise(h);
}

// std::exception_ptr (libc++ calls these with the thrown object's address).
void* __cxa_current_primary_exception() noexcept {
  Header* h = caughtStack;
  if (h == nullptr) return nullptr;
  if (h->primary != nullptr) h = h->primary;
  ++h->refs;
  return objectOf(h);
}

void __cxa_increment_exception_refcount(void* object) noexcept {
  if (object != nullptr) ++headerOf(object)->refs;
}

void __cxa_decrement_exception_refcount(void* object) noexcept {
  if (object != nullptr) release(headerOf(object));
}

// Throws the exception an exception_ptr holds through a header of its own, so
// the same object can be caught again while another catch block still holds it.
void __cxa_rethrow_primary_exception(void* object) {
  if (object == nullptr) return;
  Header* primary = headerOf(object);
  Header* h = allocateHeader(0);
  h->type = primary->type;
  h->primary = primary;
  h->refs = 1;
  h->adjusted = object;
  ++primary->refs;
  raise(h);
}

unsigned __cxa_uncaught_exceptions() noexcept { return uncaughtCount; }
bool __cxa_uncaught_exception() noexcept { return uncaughtCount != 0; }

// Registers a thread_local object's destructor. The one thread lives as long
// as the wasm instance, whose memory goes with it: there is nothing to run.
int __cxa_thread_atexit(void (*)(void*), void*, void*) noexcept { return 0; }

}  // extern "C"

// libc++'s operator new is built without exceptions here, so it would abort
// where the native builds throw std::bad_alloc (which the binding reports as
// a RangeError). These replace it.
namespace {
void* allocateOrThrow(size_t bytes, size_t alignment) {
  if (bytes == 0) bytes = 1;
  for (;;) {
    void* p = alignment <= alignof(std::max_align_t) ? std::malloc(bytes) : std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
    if (p != nullptr) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}
}  // namespace

void* operator new(size_t bytes) { return allocateOrThrow(bytes, 0); }
void* operator new[](size_t bytes) { return allocateOrThrow(bytes, 0); }
void* operator new(size_t bytes, std::align_val_t a) { return allocateOrThrow(bytes, static_cast<size_t>(a)); }
void* operator new[](size_t bytes, std::align_val_t a) { return allocateOrThrow(bytes, static_cast<size_t>(a)); }
void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return allocateOrThrow(bytes, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t bytes, const std::nothrow_t& t) noexcept { return operator new(bytes, t); }
void* operator new(size_t bytes, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return allocateOrThrow(bytes, static_cast<size_t>(a));
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t bytes, std::align_val_t a, const std::nothrow_t& t) noexcept { return operator new(bytes, a, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
