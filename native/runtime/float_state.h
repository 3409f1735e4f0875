// The floating-point control state a worker thread takes from the thread that
// starts it. On Windows with MinGW, a thread the runtime starts runs the x87
// unit at 64-bit precision while Node's threads run at the MSVC default of 53
// bits, and the C library's sin and cos use the x87 unit there: rope's angles
// then rounded differently on a pool thread, and ropeAsync's bits differed from
// rope's (seen under wine). Elsewhere both functions do nothing.
#pragma once

namespace mhsa {

struct FloatState {
  unsigned short x87 = 0;
};

#if defined(_WIN32) && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
inline FloatState currentFloatState() {
  FloatState s;
  __asm__ volatile("fnstcw %0" : "=m"(s.x87));
  return s;
}
inline void applyFloatState(const FloatState& s) { __asm__ volatile("fldcw %0" : : "m"(s.x87)); }
#else
inline FloatState currentFloatState() { return {}; }
inline void applyFloatState(const FloatState&) {}
#endif

}  // namespace mhsa
