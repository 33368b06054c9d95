// Portability macros for the kernels: one place that knows which compiler builds them.
// No Python.  Include it first in a kernel header and use the macros instead of raw
// `__attribute__` / `#pragma GCC` / `__builtin_*` spellings, so that every compiler that
// setup.py supports (GCC, Clang, Apple Clang, clang-cl on Windows) builds the same code and
// a compiler that cannot is stopped with a message that says what to do.
#pragma once

// The kernels use GCC/Clang vector extensions (`vector_size`), unsigned __int128 and
// `__builtin_*` intrinsics.  cl.exe has none of them; clang-cl has all of them.
#if defined(_MSC_VER) && !defined(__clang__)
#error "dpfast's kernels need GCC or Clang extensions: on Windows build with clang-cl (set DPFAST_CLANG_CL=1)"
#endif

#define DPF_NOINLINE __attribute__((noinline))
#define DPF_VECTOR(T, bytes) T __attribute__((vector_size(bytes)))

// Run-time AVX2 dispatch (`#pragma GCC target("avx2")` plus `__builtin_cpu_supports`):
// GCC on x86-64 only, and never when setup.py is run with DPFAST_BASELINE_ONLY=1 (which
// defines DPF_BASELINE_ONLY), so that a build can hold the baseline kernels alone.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(DPF_BASELINE_ONLY)
#define DPF_HAVE_AVX2_DISPATCH 1
#endif

#include <cstdlib>

namespace dpf {
// The one run-time AVX2 test of the kernel families that are compiled twice (csrc/solvers,
// csrc/stats): true when this build has an AVX2 variant, the CPU supports AVX2 and the
// environment variable `off_env` (DPFAST_GLM_NO_AVX2, DPFAST_STATS_NO_AVX2: to test the
// baseline variant on AVX2 machines) is not "1".  Each family caches the answer once per
// process (a function-local static).
inline bool avx2_enabled(const char* off_env) {
#if defined(DPF_HAVE_AVX2_DISPATCH)
    const char* env = std::getenv(off_env);
    if (env && env[0] == '1') return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
#else
    (void)off_env;
    return false;
#endif
}
}  // namespace dpf

// `#pragma GCC diagnostic` is understood by GCC and Clang; other compilers skip it.
#if defined(__GNUC__)
#define DPF_PRAGMA(x) _Pragma(#x)
#else
#define DPF_PRAGMA(x)
#endif
