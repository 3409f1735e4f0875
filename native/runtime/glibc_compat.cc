// Linked into the prebuilt Linux addons only (binding.gyp, mhsa_prebuild), so
// that a binary built against Debian 12's glibc 2.36 loads on glibc 2.28
// and later (docs/design/prebuilds.md). The addon links libstdc++ statically,
// and these are the symbols of it (and of the addon) that would otherwise ask
// for a glibc newer than 2.28.
#include <pthread.h>  // first: it defines __GLIBC__

#if defined(__linux__) && defined(__GLIBC__)
#include <cstdint>
#include <cstdio>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define MHSA_GLIBC_BASELINE "GLIBC_2.2.5"
#define MHSA_TAIL_CALL "jmp "
#define MHSA_PLT "@PLT"
#elif defined(__aarch64__)
#define MHSA_GLIBC_BASELINE "GLIBC_2.17"
#define MHSA_TAIL_CALL "b "
#define MHSA_PLT ""
#else
#error "glibc_compat.cc: no baseline symbol version for this architecture"
#endif

// glibc 2.34 moved libpthread into libc and gave its functions new default
// versions there. Each one's first version still exists in every glibc (in
// libpthread before 2.34, in libc after), so the link wraps every reference
// (-Wl,--wrap=<name>, listed in binding.gyp) and the wrapper jumps to that
// first version: a tail call, so no signature is restated.
#define MHSA_BASELINE_WRAPPER(name)                                          \
  __asm__(".symver mhsa_baseline_" #name ", " #name "@" MHSA_GLIBC_BASELINE "\n" \
          ".globl __wrap_" #name "\n"                                          \
          ".hidden __wrap_" #name "\n"                                         \
          ".type __wrap_" #name ", %function\n"                                \
          "__wrap_" #name ":\n"                                                \
          "  " MHSA_TAIL_CALL "mhsa_baseline_" #name MHSA_PLT "\n"              \
          ".size __wrap_" #name ", . - __wrap_" #name "\n");

MHSA_BASELINE_WRAPPER(pthread_create)
MHSA_BASELINE_WRAPPER(pthread_join)
MHSA_BASELINE_WRAPPER(pthread_detach)
MHSA_BASELINE_WRAPPER(pthread_once)
MHSA_BASELINE_WRAPPER(pthread_key_create)
MHSA_BASELINE_WRAPPER(__pthread_key_create)
MHSA_BASELINE_WRAPPER(pthread_key_delete)
MHSA_BASELINE_WRAPPER(pthread_getspecific)
MHSA_BASELINE_WRAPPER(pthread_setspecific)
MHSA_BASELINE_WRAPPER(pthread_mutex_trylock)
MHSA_BASELINE_WRAPPER(pthread_rwlock_rdlock)
MHSA_BASELINE_WRAPPER(pthread_rwlock_wrlock)
MHSA_BASELINE_WRAPPER(pthread_rwlock_unlock)

// glibc 2.29 gave pow (libm) a new default version that drops the old SVID
// error handling; both return the same values, and rope's frequencies use it.
MHSA_BASELINE_WRAPPER(pow)
// The same release did so for exp and exp2: attention's sink term and the
// decode path's sink use them in double.
MHSA_BASELINE_WRAPPER(exp)
MHSA_BASELINE_WRAPPER(exp2)

extern "C" {

// libstdc++ skips atomic reference counts while glibc (2.32 and later) says
// the process has one thread. Defined here and hidden, it binds inside the
// addon, and 0 ("other threads may exist") keeps the counts always atomic:
// correct in any process, and the addon's own pool makes it true anyway.
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;

// glibc 2.36's arc4random, which static libstdc++'s std::random_device
// reaches (the addon never makes one, but the archive member comes with the
// strings it does use): the kernel's getrandom, as glibc does it. Every kernel
// Node 20 runs on (4.18+) has it; the loop retries an interrupted call.
__attribute__((visibility("hidden"))) uint32_t __wrap_arc4random(void) {
  uint32_t value = 0;
  while (syscall(SYS_getrandom, &value, sizeof value, 0) != static_cast<long>(sizeof value)) {
  }
  return value;
}

}  // extern "C"
#endif
