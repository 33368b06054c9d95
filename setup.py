"""Build of dpfast's native code.

* One pybind11 extension per file ``csrc/bindings/<name>.cpp``, importable as
  ``dpfast._<name>`` (``_core``: continuous samplers; ``_exact``: discrete and snapping
  samplers; ``_selection``: exponential mechanism; ``_pld``: privacy-loss distributions;
  ``_glm``: GLM solvers; ``_multinomial``: the K-output softmax loss; ``_clip``: per-example
  clipping; ``_public``: public-data oracles; ``_tables``: grouped aggregates; ``_trees``: random
  trees' leaf counts; ``_stats``: the one-pass statistics of dpfast.tools, GaussianNB, PCA, SSP and
  KMeans).
  Kernels live in headers under ``csrc/`` that know nothing of Python; ``csrc/bindings/`` is
  the only place that does.  Separate modules keep each subpackage's import light and let a
  kernel be rebuilt without relinking the others.
* ``dpfast._chacha`` -- Cython.  A ChaCha20 ``numpy.random.BitGenerator``: NumPy exposes
  the ``BitGenerator`` base class only to Cython (``numpy/random/bit_generator.pxd``), so
  this is where Cython is the better fit.

Environment switches:

* ``DPFAST_NATIVE_ARCH=1`` adds ``-march=native`` (off by default so that wheels run on any
  x86-64 / aarch64 machine).
* ``DPFAST_BUILD_ONLY=_core,_pld`` builds only the named extensions (development).
* ``DPFAST_SANITIZE=1`` builds with AddressSanitizer and UndefinedBehaviorSanitizer
  (``-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  -O1 -g1``, compile and link).  For ``.ci/sanitize`` only, which builds a copy of the tree:
  the modules need ``LD_PRELOAD`` of the ASan runtime to import.
* ``DPFAST_BUILD_JOBS=k`` compiles k extensions at once (default: the usable CPUs).
* ``DPFAST_BASELINE_ONLY=1`` defines ``DPF_BASELINE_ONLY`` (see ``csrc/portable.hpp``): kernels
  that have an AVX2 variant compile only their baseline variant.  At run time,
  ``DPFAST_GLM_NO_AVX2=1`` makes an ordinary build choose the baseline GLM kernels
  (``tests/linear_model/test_solver_baseline_build.py`` checks both give bit-identical results).
* ``DPFAST_CLANG_CL=1`` (Windows): compile with ``clang-cl`` instead of ``cl.exe``.  The kernels
  use GCC/Clang vector extensions, ``__int128`` and ``__builtin_*`` intrinsics, which ``cl.exe``
  does not accept; ``clang-cl`` (shipped with Visual Studio's "C++ Clang tools" and with LLVM)
  accepts them and links against the same MSVC runtime.

Flags are chosen per compiler in :class:`PortableBuildExt`: GCC/Clang get
``-O3 -fno-math-errno -ffp-contract=off -fvisibility=hidden``; MSVC ``/O2 /fp:precise`` (no
contraction into FMA unless ``/fp:contract``; symbols of a DLL are hidden unless exported);
clang-cl both ``/O2 /fp:precise`` and ``/clang:-ffp-contract=off``.  No fused multiply-adds
anywhere, so that results are bit-identical across builds and to the Python reference paths.
"""
import glob
import os
import shutil

import numpy as np
from Cython.Build import cythonize
from pybind11.setup_helpers import Pybind11Extension
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Per-compiler flags, added in PortableBuildExt.build_extensions once the compiler is known.
# -ffp-contract=off / /fp:precise: no fused multiply-adds, so that results are bit-identical
# across builds (and to the Python reference paths some samplers have), -march=native included.
GNU_FLAGS = ["-O3", "-fvisibility=hidden", "-fno-math-errno", "-ffp-contract=off"]
GNU_LINK = ["-pthread"]
MSVC_FLAGS = ["/O2", "/fp:precise"]
CLANG_CL_FLAGS = MSVC_FLAGS + ["/clang:-ffp-contract=off", "/clang:-fno-math-errno", "-Wno-unused-command-line-argument"]
if os.environ.get("DPFAST_NATIVE_ARCH") == "1":
    GNU_FLAGS.append("-march=native")
if os.environ.get("DPFAST_SANITIZE") == "1":
    SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                "-fno-sanitize-recover=undefined", "-g1"]
    # -O1 replaces -O3: readable reports, and the sanitizers' overhead stays moderate.  -g1 (line
    # tables: every report's frames still name file and line) compiles in 3/4 of -g's time.
    GNU_FLAGS = [f for f in GNU_FLAGS if not f.startswith("-O")] + ["-O1"] + SANITIZE
    GNU_LINK = GNU_LINK + SANITIZE
MACROS = [("DPF_BASELINE_ONLY", "1")] if os.environ.get("DPFAST_BASELINE_ONLY") == "1" else []

# A header change must rebuild every module (kernels are header-only).
HEADERS = sorted(glob.glob("csrc/**/*.hpp", recursive=True))

ONLY = {s.strip() for s in os.environ.get("DPFAST_BUILD_ONLY", "").split(",") if s.strip()}


def wanted(short_name: str) -> bool:
    return not ONLY or short_name in ONLY


extensions = []
for src in sorted(glob.glob("csrc/bindings/*.cpp")):
    short = "_" + os.path.splitext(os.path.basename(src))[0]
    if not wanted(short):
        continue
    extensions.append(
        Pybind11Extension(
            "dpfast." + short,
            [src],
            include_dirs=["csrc", np.get_include()],
            depends=HEADERS,
            define_macros=list(MACROS),
            cxx_std=17,
        )
    )

if wanted("_chacha"):
    extensions += cythonize(
        [
            Extension(
                "dpfast._chacha",
                ["dpfast/_chacha.pyx"],
                include_dirs=["csrc", np.get_include()],
                depends=HEADERS,
                language="c++",
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")] + MACROS,
            )
        ],
        language_level=3,
    )


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class PortableBuildExt(build_ext):
    """Per-compiler flags, and the extensions compiled in parallel.

    Parallelism is across modules (one source file each): ``DPFAST_BUILD_JOBS`` workers,
    default the CPUs this process may use; a plain ``pip install`` otherwise compiles them one
    after another.  Flags are chosen here, not when the extensions are declared, because only
    now is the compiler known (``--compiler``, ``CC``, MSVC on Windows)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            jobs = os.environ.get("DPFAST_BUILD_JOBS")
            self.parallel = int(jobs) if jobs else _usable_cpus()

    def _flags(self):
        if self.compiler.compiler_type != "msvc":
            return GNU_FLAGS, GNU_LINK, ["-std=c++17"]
        # MSVC toolchain: cl.exe, or clang-cl when asked for (the kernels need GCC extensions).
        if os.environ.get("DPFAST_CLANG_CL") == "1":
            if not getattr(self.compiler, "initialized", True):
                self.compiler.initialize()
            clang_cl = shutil.which("clang-cl")
            if clang_cl is None:
                raise RuntimeError("DPFAST_CLANG_CL=1 but clang-cl is not on PATH")
            self.compiler.cc = clang_cl
            return CLANG_CL_FLAGS, [], ["/std:c++17"]
        return MSVC_FLAGS, [], ["/std:c++17"]

    def build_extensions(self):
        compile_flags, link_flags, std = self._flags()
        for ext in self.extensions:
            extra = list(compile_flags)
            if not isinstance(ext, Pybind11Extension):
                extra += std  # (Pybind11Extension adds its own from cxx_std)
            ext.extra_compile_args = list(ext.extra_compile_args or []) + extra
            ext.extra_link_args = list(ext.extra_link_args or []) + link_flags
        super().build_extensions()


setup(ext_modules=extensions, cmdclass={"build_ext": PortableBuildExt})
