"""Build of dpfast's native code.

* One pybind11 extension per file ``csrc/bindings/<name>.cpp``, importable as
  ``dpfast._<name>`` (``_core``: continuous samplers; ``_exact``: discrete and snapping
  samplers; ``_selection``: exponential mechanism; ``_pld``: privacy-loss distributions;
  ``_glm``: GLM solvers; ``_clip``: per-example clipping; ``_public``: public-data oracles).
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
  -O1 -g``, compile and link).  For ``.ci/sanitize`` only, which builds a copy of the tree:
  the modules need ``LD_PRELOAD`` of the ASan runtime to import.
"""
import glob
import os

import numpy as np
from Cython.Build import cythonize
from pybind11.setup_helpers import Pybind11Extension
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# -ffp-contract=off: no fused multiply-adds, so that results are bit-identical across
# builds (and to the Python reference paths some samplers have), -march=native included.
CXX_FLAGS = ["-O3", "-std=c++17", "-fvisibility=hidden", "-fno-math-errno", "-ffp-contract=off"]
if os.environ.get("DPFAST_NATIVE_ARCH") == "1":
    CXX_FLAGS.append("-march=native")
LINK_FLAGS = ["-pthread"]
if os.environ.get("DPFAST_SANITIZE") == "1":
    SANITIZE = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                "-fno-sanitize-recover=undefined", "-g"]
    # -O1 replaces -O3: readable reports, and the sanitizers' overhead stays moderate.
    CXX_FLAGS = [f for f in CXX_FLAGS if not f.startswith("-O")] + ["-O1"] + SANITIZE
    LINK_FLAGS = LINK_FLAGS + SANITIZE

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
            extra_compile_args=CXX_FLAGS,
            extra_link_args=LINK_FLAGS,
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
                extra_compile_args=CXX_FLAGS,
                extra_link_args=LINK_FLAGS,
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            )
        ],
        language_level=3,
    )



class ParallelBuildExt(build_ext):
    """Compile the extensions in parallel (one source file each, so the parallelism is across
    modules): ``DPFAST_BUILD_JOBS`` workers, default the CPUs this process may use.  A plain
    ``pip install`` otherwise compiles them one after another."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            jobs = os.environ.get("DPFAST_BUILD_JOBS")
            self.parallel = int(jobs) if jobs else len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
                else (os.cpu_count() or 1)


setup(ext_modules=extensions, cmdclass={"build_ext": ParallelBuildExt})
