# Sourced by native-tests.sh and test-emulated-avx512.sh: whether this machine
# needs the AVX-512 kernels emulated on AVX2 (CMake's MHSA_EMULATE_AVX512) to
# test them, and SIMDe's headers (Debian's libsimde-dev) for that build.

cpu_has() { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -qw "$1"; }

# True when the CPU cannot run mhsa's AVX-512 table (the flags detectCpuIsa
# checks: F, VL, BW, DQ and FMA) but can run the emulated one (AVX2 and FMA).
emulated_avx512_needed() {
  if cpu_has avx512f && cpu_has avx512vl && cpu_has avx512bw && cpu_has avx512dq && cpu_has fma; then return 1; fi
  cpu_has avx2 && cpu_has fma
}

ensure_simde() {
  if [ -f /usr/include/simde/x86/avx512.h ]; then return 0; fi
  echo "installing libsimde-dev from Debian's packages (AVX-512 emulated on AVX2)"
  bash scripts/apt-install.sh libsimde-dev
}
