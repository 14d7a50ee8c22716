"""Build the Cython kernels, with OpenMP when the compiler supports it."""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

KERNELS = ["_forest", "_predict", "_semivalues", "_saabas", "_qshap", "_qshap_sampled", "_treeprob", "_piecewise",
           "_interventional", "_interactions"]


def _compiler_has_openmp():
    """Compile a tiny OpenMP program; False when the compiler cannot."""
    if sys.platform == "win32":
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
    def build_extensions(self):
        openmp = os.environ.get("SKLEARN_R2SHAP_NO_OPENMP") is None and _compiler_has_openmp()
        for ext in self.extensions:
            if self.compiler.compiler_type == "msvc":
                ext.extra_compile_args += ["/O2"] + (["/openmp"] if openmp else [])
            else:
                ext.extra_compile_args += ["-O3"] + (["-fopenmp"] if openmp else [])
                ext.extra_link_args += ["-fopenmp"] if openmp else []
        if not openmp:
            print("sklearn-r2shap: building without OpenMP (single-threaded kernels)")
        super().build_extensions()


extensions = [
    Extension(
        f"sklearn_r2shap._kernels.{name}",
        [f"sklearn_r2shap/_kernels/{name}.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
    )
    for name in KERNELS
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
    cmdclass={"build_ext": BuildExt},
)
