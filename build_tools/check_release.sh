#!/usr/bin/env bash
# The release check: sklearn-r2shap as a user's pip installs it.
#
#   build_tools/check_release.sh [STEP ...]
#
# Steps (all of them, in this order, when none is named):
#   sdist     export HEAD, `python -m build` (sdist, then a wheel built from
#             that sdist with build isolation), `twine check`
#   main      the wheel in a fresh venv with the [test] extra: the README's
#             main command run outside the source tree, then the full suite
#             against the installed package (tests/test_packaging.py asserts
#             the package imported is the venv's, and that the wheel and the
#             sdist hold every module of the source tree); only those
#             packaging checks where RELEASE_CHECK_MAIN_SUBSET=packaging (CI:
#             its step 2 has run the full suite on the same source, and the
#             mindeps and noopenmp steps run the fast subset on this Python)
#   pythons   every other CPython that pyproject.toml's classifiers claim,
#             found on PATH or through pyenv (skipped with a message where
#             absent): a wheel built by pip from the sdist, the main command
#             and the release subset (below)
#   mindeps   the main Python's wheel with the oldest supported versions
#             (sklearn_r2shap/_min_dependencies.py): the fast subset
#             (-m "not slow")
#   noopenmp  a wheel built with SKLEARN_R2SHAP_NO_OPENMP=1, installed over
#             the main step's venv when it exists (its [test] dependencies
#             are the same): the release subset
#
# The release subset is what a compiler, an interpreter or a library version
# can break: every kernel against its brute-force reference, every adapter
# against its library's own values, the estimators' scikit-learn checks,
# Ctrl-C and threads, the packaging checks and the package's doctests (the
# fast subset, -m "not slow", runs everywhere where RELEASE_CHECK_SUBSET=fast).
#
# A maintainer runs it before tagging; CI (.ci/run) runs it on every change.
# Work goes to $RELEASE_CHECK_DIR, kept afterwards; by default to a new
# temporary directory, removed on exit (each run needs about 5 GB of venvs;
# the venvs of the other Pythons and of the floors go as soon as their tests end).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-python3}
if [ -n "${RELEASE_CHECK_DIR:-}" ]; then
    WORK=$RELEASE_CHECK_DIR
else
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"
echo "release check: work in $WORK; free there: $(df -h "$WORK" | awk 'NR == 2 {print $4}')"
STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(sdist main pythons mindeps noopenmp)
FAST=(-m "not slow")
RELEASE_SUBSET=(-m "not slow" tests/test_packaging.py tests/test_kernels.py tests/test_qshap_kernel.py
    tests/test_semivalue_tables.py tests/test_treeprob.py tests/test_interventional.py
    tests/test_piecewise.py tests/test_adapter_sklearn.py tests/test_adapter_xgboost.py
    tests/test_adapter_lightgbm.py tests/test_adapter_catboost.py tests/test_adapter_fixes.py
    tests/test_explainer.py tests/test_inputs.py tests/test_selectors.py tests/test_interrupt.py
    --pyargs sklearn_r2shap)
[ "${RELEASE_CHECK_SUBSET:-release}" = fast ] && RELEASE_SUBSET=("${FAST[@]}")

log() { printf '\n== release check: %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
timed() {  # timed NAME COMMAND...: run, then print the step's seconds
    local name=$1 start=$SECONDS
    shift
    "$@"
    printf '== release check: %s took %d s\n' "$name" $((SECONDS - start))
}

if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    echo "release check: uncommitted changes are not checked (HEAD is exported)" >&2
fi

# The source as committed, and the tests without the package beside them.
SRC=$WORK/src
TESTS=$WORK/tests-only
DIST=$WORK/dist
if [ ! -d "$SRC" ]; then
    mkdir -p "$SRC" "$TESTS" "$DIST"
    git archive HEAD | tar -x -C "$SRC"
    (cd "$SRC" && tar -c --exclude=./sklearn_r2shap --exclude=./setup.py .) | tar -x -C "$TESTS"
fi

new_venv() {  # new_venv DIR INTERPRETER
    "$2" -m venv "$1"
    "$1/bin/python" -m pip install --quiet --upgrade pip
}

run_tests() {  # run_tests VENV WHEEL [pytest args...]: the installed package, from outside the source
    # (the whole suite and the doctests where no test paths are given)
    local venv=$1 wheel=$2 arg paths=(tests doc --pyargs sklearn_r2shap) optional=()
    shift 2
    for arg in "$@"; do
        case $arg in tests/*|--pyargs) paths=() ;; esac
    done
    # the installed sklearn_r2shap/spark.py imports pyspark (extra "spark"), which
    # these venvs do not install: its doctests are not collected without it
    "$venv/bin/python" -c "import pyspark" 2>/dev/null || optional=(--ignore="$(cd "$WORK" \
        && "$venv/bin/python" -c 'import os, sklearn_r2shap; print(os.path.dirname(sklearn_r2shap.__file__))')/spark.py")
    (cd "$TESTS" && SKLEARN_R2SHAP_EXPECT_INSTALLED=1 SKLEARN_R2SHAP_WHEEL="$wheel" \
        SKLEARN_R2SHAP_EXPECT_OPENMP="${SKLEARN_R2SHAP_EXPECT_OPENMP:-1}" \
        SKLEARN_R2SHAP_SDIST="$(echo "$DIST"/*.tar.gz)" SKLEARN_R2SHAP_SOURCE="$SRC/sklearn_r2shap" \
        "$venv/bin/python" -m pytest -p no:cacheprovider -n 2 -q "${optional[@]}" "$@" "${paths[@]}")
}

main_command() {  # main_command VENV: the README's main command, outside the source tree
    (cd "$WORK" && "$1/bin/python" -m sklearn_r2shap)
}

step_sdist() {
    log "sdist and a wheel built from it ($($PYTHON --version))"
    local tools=$WORK/venv-tools
    [ -d "$tools" ] || new_venv "$tools" "$PYTHON"
    "$tools/bin/pip" install --quiet "build>=1.2" "twine>=6.1"
    rm -rf "$DIST"/*
    timed "python -m build" "$tools/bin/python" -m build --outdir "$DIST" "$SRC"
    "$tools/bin/twine" check --strict "$DIST"/*
    echo "sdist contents:"
    tar -tzf "$DIST"/*.tar.gz | sed 's|^[^/]*/||' | grep -v '/$' | sort | sed 's/^/  /'
}

wheel_for() {  # wheel_for TAG: the wheel of a CPython tag (cp311, ...) in $DIST
    local wheel
    for wheel in "$DIST"/*-"$1"-"$1"-*.whl "$DIST"/*/*-"$1"-"$1"-*.whl; do
        if [ -f "$wheel" ]; then
            echo "$wheel"
            return
        fi
    done
    echo "release check: no $1 wheel in $DIST" >&2
    return 1
}

step_main() {
    local tag wheel venv=$WORK/venv-main
    tag=$($PYTHON -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    wheel=$(wheel_for "$tag")
    log "main: $wheel"
    rm -rf "$venv"
    new_venv "$venv" "$PYTHON"
    timed "install the wheel with [test]" "$venv/bin/pip" install --quiet "$wheel[test]"
    "$venv/bin/pip" show sklearn-r2shap
    timed "main command" main_command "$venv"
    if [ "${RELEASE_CHECK_MAIN_SUBSET:-full}" = packaging ]; then
        timed "packaging checks on the installed wheel" run_tests "$venv" "$wheel" -k test_packaging
    else
        timed "full suite on the installed wheel" run_tests "$venv" "$wheel"
    fi
}

claimed_versions() {  # the minor versions the classifiers claim, e.g. "3.11 3.12 3.13"
    grep -o '"Programming Language :: Python :: 3\.[0-9]*"' "$SRC/pyproject.toml" \
        | grep -o '3\.[0-9]*' | sort -t. -k2 -n | tr '\n' ' '
}

find_python() {  # find_python 3.12: an interpreter of that version, or nothing
    local version=$1 candidate
    for candidate in "python$version" \
            $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/"$version".*/bin/python"$version" 2>/dev/null | sort -V -r); do
        if command -v "$candidate" >/dev/null 2>&1 \
                && [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$version" ]; then
            command -v "$candidate"
            return
        fi
    done
}

step_pythons() {
    local main version interpreter venv wheel tag
    main=$($PYTHON -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    for version in $(claimed_versions); do
        [ "$version" = "$main" ] && continue
        interpreter=$(find_python "$version")
        if [ -z "$interpreter" ]; then
            log "Python $version: SKIPPED, no interpreter found (PATH or pyenv)"
            continue
        fi
        log "Python $version ($interpreter)"
        venv=$WORK/venv-$version
        tag="cp${version/./}"
        rm -rf "$venv"
        mkdir -p "$DIST/$tag"
        new_venv "$venv" "$interpreter"
        timed "pip wheel from the sdist" "$venv/bin/pip" wheel --quiet --no-deps --wheel-dir "$DIST/$tag" "$DIST"/*.tar.gz
        wheel=$(wheel_for "$tag")
        timed "install the wheel with [test]" "$venv/bin/pip" install --quiet "$wheel[test]"
        timed "main command" main_command "$venv"
        timed "release subset on Python $version" run_tests "$venv" "$wheel" "${RELEASE_SUBSET[@]}"
        rm -rf "$venv"
    done
}

step_mindeps() {
    local tag wheel venv=$WORK/venv-mindeps pins
    tag=$($PYTHON -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    wheel=$(wheel_for "$tag")
    pins=$($PYTHON "$SRC/sklearn_r2shap/_min_dependencies.py" install test)
    log "minimum dependencies: $pins"
    rm -rf "$venv"
    new_venv "$venv" "$PYTHON"
    # the floors pinned, the other test tools at whatever versions fit them
    # shellcheck disable=SC2086
    timed "install the wheel with the floors" "$venv/bin/pip" install --quiet "$wheel[test]" $pins
    "$venv/bin/pip" list 2>/dev/null | grep -iE '^(numpy|scipy|scikit-learn|pandas|xgboost-cpu|lightgbm|catboost|dask|distributed|matplotlib) '
    timed "main command" main_command "$venv"
    timed "fast subset on the minimum dependencies" run_tests "$venv" "$wheel" "${FAST[@]}"
    rm -rf "$venv"
}

step_noopenmp() {
    local venv=$WORK/venv-main out=$WORK/dist-noopenmp wheel
    log "without OpenMP (SKLEARN_R2SHAP_NO_OPENMP=1)"
    rm -rf "$out"
    if [ ! -x "$venv/bin/python" ]; then
        venv=$WORK/venv-noopenmp
        rm -rf "$venv"
        new_venv "$venv" "$PYTHON"
    fi
    timed "pip wheel from the sdist, no OpenMP" env SKLEARN_R2SHAP_NO_OPENMP=1 \
        "$venv/bin/pip" wheel --quiet --no-deps --no-cache-dir --wheel-dir "$out" "$DIST"/*.tar.gz
    wheel=$(echo "$out"/*.whl)
    # over the main step's wheel, when that venv exists: the same [test] dependencies
    timed "install the wheel with [test]" "$venv/bin/pip" install --quiet --force-reinstall --no-deps "$wheel"
    "$venv/bin/pip" install --quiet "$wheel[test]"
    timed "main command" main_command "$venv"
    SKLEARN_R2SHAP_EXPECT_OPENMP=0 timed "release subset without OpenMP" run_tests "$venv" "$wheel" "${RELEASE_SUBSET[@]}"
}

for step in "${STEPS[@]}"; do
    "step_$step"
done
if [ -n "${RELEASE_CHECK_DIR:-}" ]; then
    log "done in ${SECONDS} s; work kept in $WORK"
else
    log "done in ${SECONDS} s; $WORK removed"
fi
