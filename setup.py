"""Build the Cython kernels, with OpenMP when the compiler supports it.

Everything else (name, version, dependencies, packages) is in
``pyproject.toml``. The ``.pyx`` sources are translated to C only when the
extensions are built, so an sdist carries the sources and no generated C.
Set ``SKLEARN_R2SHAP_NO_OPENMP=1`` to build single-threaded kernels.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

#: every kernel source is built: a new .pyx file cannot be left out of a wheel
KERNELS = sorted(path.stem for path in pathlib.Path("sklearn_r2shap", "_kernels").glob("*.pyx"))

CYTHON_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
}


def _compiler_has_openmp(compiler):
    """Compile a tiny OpenMP program; False when the compiler cannot."""
    if compiler.compiler_type == "msvc":
        return True  # MSVC: /openmp
    cc = os.environ.get("CC", "cc")
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "omp.c")
        with open(src, "w") as fh:
            fh.write("#include <omp.h>\nint main(void){return omp_get_max_threads() < 1;}\n")
        cmd = [cc, "-fopenmp", src, "-o", os.path.join(tmp, "omp")]
        return subprocess.call(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0
    except OSError:
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class BuildExt(build_ext):
    """Cythonize at build time, compile the kernels in parallel, add OpenMP flags."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def build_extensions(self):
        from Cython.Build import cythonize

        # C sources in place of the .pyx ones, on the extensions setuptools finalized
        translated = cythonize(self.extensions, compiler_directives=CYTHON_DIRECTIVES,
                               nthreads=self.parallel if self.parallel > 1 else 0)
        sources = {ext.name: ext.sources for ext in translated}
        for ext in self.extensions:
            ext.sources = sources[ext.name]
        openmp = os.environ.get("SKLEARN_R2SHAP_NO_OPENMP") is None and _compiler_has_openmp(self.compiler)
        for ext in self.extensions:
            if self.compiler.compiler_type == "msvc":
                ext.extra_compile_args += ["/O2"] + (["/openmp"] if openmp else [])
            else:
                ext.extra_compile_args += ["-O3", "-g0"] + (["-fopenmp"] if openmp else [])
                ext.extra_link_args += ["-fopenmp"] if openmp else []
        if not openmp:
            print("sklearn-r2shap: building without OpenMP (single-threaded kernels)", file=sys.stderr)
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            f"sklearn_r2shap._kernels.{name}",
            [f"sklearn_r2shap/_kernels/{name}.pyx"],
            include_dirs=[np.get_include()],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
        )
        for name in KERNELS
    ],
    cmdclass={"build_ext": BuildExt},
)
