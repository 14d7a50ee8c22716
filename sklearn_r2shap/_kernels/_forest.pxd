# The flat tree-ensemble arrays seen from nogil kernels, and the one routine
# that routes a row through a node (doc/local_attributions.rst). Every kernel reads
# the ensemble through ``Forest`` and ``next_node``; none re-implements them.
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.math cimport isnan, fabs
from cpython.exc cimport PyErr_Fetch, PyErr_Restore, PyErr_SetNone, PyErr_SetString
from cpython.ref cimport PyObject

cdef extern from *:
    """
    #if defined(_WIN32)
    #include <windows.h>
    static double r2shap_monotonic(void) {
        LARGE_INTEGER freq, count;
        QueryPerformanceFrequency(&freq);
        QueryPerformanceCounter(&count);
        return (double)count.QuadPart / (double)freq.QuadPart;
    }
    #else
    #include <time.h>
    static double r2shap_monotonic(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    #endif
    #ifdef _OPENMP
    #include <omp.h>
    static int r2shap_thread_num(void) { return omp_get_thread_num(); }
    #else
    static int r2shap_thread_num(void) { return 0; }
    #endif
    static int r2shap_load_flag(int* flag) { return *(volatile int*)flag; }
    static void r2shap_store_flag(int* flag) { *(volatile int*)flag = 1; }
    """
    int r2shap_check_signals "PyErr_CheckSignals" () noexcept
    double r2shap_monotonic() noexcept nogil
    int r2shap_thread_num() noexcept nogil
    int r2shap_load_flag(int* flag) noexcept nogil
    void r2shap_store_flag(int* flag) noexcept nogil

cdef enum:
    DECISION_LEQ = 0
    DECISION_LT = 1
    DECISION_LEQ_ZERO_MISSING = 2
    DECISION_CATEGORICAL = 3

cdef struct Forest:
    const int64_t* left
    const int64_t* right
    const int64_t* default_child
    const int64_t* feature       # the node's player (its split feature, or its group)
    const int64_t* route_feature # the column of x the node's rule reads
    const double* threshold
    const uint8_t* decision
    const int64_t* cat_start
    const int64_t* cat_words
    const uint32_t* cat_bits
    const double* ratio        # cover ratio c_k / c_parent(k)
    const int64_t* parent
    const int64_t* prev_same   # nearest ancestor edge on the same feature
    const double* value        # (n_nodes, n_values), row-major
    const int64_t* tree_start  # (n_trees + 1)
    const int64_t* tree_output # (n_trees)
    int64_t n_trees
    int64_t n_nodes
    int64_t n_values
    int64_t n_outputs
    int64_t n_features
    int64_t max_tree_nodes


cdef Forest forest_from(object ensemble) except *


# A pattern structure (_semivalues.pattern_structure) seen from nogil
# kernels: per leaf v of every tree (leaves by tree), its d_v distinct path
# features in order of first appearance from the root (bit b of a row's
# pattern at v), flat from fstart[v].
cdef struct Patterns:
    const int64_t* node_slot        # per node: the bit of its edge's feature (row_patterns)
    const int64_t* leaf_node        # per leaf: its node (global index)
    const int64_t* dim              # d_v
    const int64_t* fstart           # where v's features start in feature, ratio, edge
    const int64_t* feature
    const double* ratio             # R: the product of the cover ratios of its edges
    const int64_t* edge             # the node its deepest edge leads to (X is read there)
    const int64_t* tree_leaf_start  # (n_trees + 1): tree t's leaves
    int64_t n_leaves
    int64_t n_entries               # features of all leaves (fstart[n_leaves])
    int64_t max_leaves              # most leaves of a tree (at least 1)
    int64_t max_dim                 # most d_v (0 without leaves)


cdef Patterns patterns_from(object structure, bint maxima=*) except *


cdef inline int64_t next_node(const Forest* f, int64_t node, const double* x) noexcept nogil:
    """The child of internal ``node`` that row ``x`` goes to."""
    cdef double v = x[f.route_feature[node]]
    cdef uint8_t kind = f.decision[node]
    cdef int64_t category, word
    if isnan(v):
        return f.default_child[node]
    if kind == DECISION_LEQ:
        return f.left[node] if v <= f.threshold[node] else f.right[node]
    if kind == DECISION_LT:
        return f.left[node] if v < f.threshold[node] else f.right[node]
    if kind == DECISION_LEQ_ZERO_MISSING:
        if fabs(v) <= 1.0000000180025095e-35:  # LightGBM kZeroThreshold = 1e-35f
            return f.default_child[node]
        return f.left[node] if v <= f.threshold[node] else f.right[node]
    # categorical: int(x) in the node's bitset goes left
    if v < 0 or v >= 2147483648.0:
        return f.right[node]
    category = <int64_t>v
    word = category >> 5
    if word < f.cat_words[node] and (f.cat_bits[f.cat_start[node] + word] >> (category & 31)) & 1:
        return f.left[node]
    return f.right[node]


cdef inline bint goes_left(const Forest* f, int64_t node, const double* x) noexcept nogil:
    """Whether row ``x`` goes to the left child of ``node`` (meaningless for a
    leaf, but safe: a leaf reads column 0). Branch-free for numeric splits."""
    cdef int64_t j = f.route_feature[node]
    cdef double v = x[j if j >= 0 else 0]
    cdef uint8_t kind = f.decision[node]
    if isnan(v):
        return f.default_child[node] == f.left[node]
    if kind == DECISION_LEQ:
        return v <= f.threshold[node]
    if kind == DECISION_LT:
        return v < f.threshold[node]
    return next_node(f, node, x) == f.left[node]


cdef inline int64_t leaf_of(const Forest* f, int64_t t, const double* x) noexcept nogil:
    """The leaf (global index) of tree ``t`` that row ``x`` reaches."""
    cdef int64_t node = f.tree_start[t]
    while f.left[node] >= 0:
        node = next_node(f, node, x)
    return node


cdef inline void add_leaf_value(const Forest* f, int64_t t, int64_t leaf,
                                double* out) noexcept nogil:
    """Add the value(s) of ``leaf`` of tree ``t`` to a row's outputs ``out``
    (n_outputs,): one value to the tree's output, or one per output."""
    cdef int64_t w
    if f.n_values == 1:
        out[f.tree_output[t]] += f.value[leaf]
    else:
        for w in range(f.n_values):
            out[w] += f.value[leaf * f.n_values + w]


cdef inline void path_factors(
    const Forest* f, int64_t t, const double* x,
    uint8_t* left_taken, double* ratio_prod, double* follow_prod,
) noexcept nogil:
    """The row-dependent part of the path-dependent game of tree ``t``.

    For every node k (local index) and the feature j of the edge into it:
    ``ratio_prod[k]`` = R, the product of the cover ratios of the j-edges on
    the path to k, and ``follow_prod[k]`` = X, 1 if ``x`` takes all of them
    else 0 (TreeGrad's gamma = X / R, treegrad-ranker Lemma 1). A feature
    not in S weighs a path by R, a feature in S by X.
    """
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t kk, k, p, q
    cdef double rk, xk
    left_taken[0] = goes_left(f, start, x)
    for kk in range(1, n):
        k = start + kk
        p = f.parent[k]
        rk = f.ratio[k]
        xk = 1.0 if left_taken[p - start] == (f.left[p] == k) else 0.0
        q = f.prev_same[k]
        if q >= 0:
            rk = rk * ratio_prod[q - start]
            xk = xk * follow_prod[q - start]
        ratio_prod[kk] = rk
        follow_prod[kk] = xk
        left_taken[kk] = goes_left(f, k, x)


cdef inline void row_patterns(
    const Forest* f, int64_t t, const double* x, const int64_t* node_slot,
    uint8_t* left_taken, uint64_t* pattern,
) noexcept nogil:
    """Pattern tables: at every node k (local index) of tree ``t``, the bits X
    of the distinct features on the path to k, bit ``node_slot[k]`` for the
    edge into k (x takes it, and took the feature's earlier edges)."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t kk, k, p, b
    cdef uint64_t bit
    left_taken[0] = goes_left(f, start, x)
    pattern[0] = 0
    for kk in range(1, n):
        k = start + kk
        p = f.parent[k] - start
        b = node_slot[k]
        bit = (left_taken[p] == (f.left[start + p] == k))
        if f.prev_same[k] >= 0:
            bit = bit & (pattern[p] >> b)
        pattern[kk] = (pattern[p] & ~((<uint64_t> 1) << b)) | (bit << b)
        if f.left[k] >= 0:  # only internal nodes' decisions are read
            left_taken[kk] = goes_left(f, k, x)


# Ctrl-C in nogil kernels. Python runs signal handlers only in the main
# thread, which is OpenMP thread 0 of a region it starts. The one parallel
# loop (_common.parallel_units) polls ``interrupted(&stop)`` once per chunk
# of work units (rows, trees), and a long unit polls it within: thread 0
# runs the handlers at most every 50 ms (a monotonic clock read otherwise),
# and keeps the exception they raise; all threads see the stop flag and skip
# their remaining work. After the parallel region, ``interrupt_raise(&stop)``
# re-raises the exception (KeyboardInterrupt for Ctrl-C).
cdef struct Interrupt:
    int stop
    int no_memory              # a thread could not allocate its scratch space
    double last_check
    PyObject* exc_type
    PyObject* exc_value
    PyObject* exc_traceback


cdef inline Interrupt interrupt_new() noexcept nogil:
    cdef Interrupt it
    it.stop = 0
    it.no_memory = 0
    it.last_check = r2shap_monotonic()
    it.exc_type = NULL
    it.exc_value = NULL
    it.exc_traceback = NULL
    return it


cdef inline bint interrupted(Interrupt* it) noexcept nogil:
    """True once a signal handler raised (every thread stops at its next poll)."""
    cdef double now
    if r2shap_load_flag(&it.stop):
        return True
    if r2shap_thread_num() == 0:
        now = r2shap_monotonic()
        if now - it.last_check >= 0.05:
            it.last_check = now
            with gil:
                if r2shap_check_signals() != 0:
                    PyErr_Fetch(&it.exc_type, &it.exc_value, &it.exc_traceback)
                    r2shap_store_flag(&it.stop)
    return r2shap_load_flag(&it.stop)


cdef inline void interrupt_no_memory(Interrupt* it) noexcept nogil:
    """A thread's scratch allocation failed: every thread stops at its next
    poll and ``interrupt_raise`` raises MemoryError."""
    r2shap_store_flag(&it.no_memory)
    r2shap_store_flag(&it.stop)


cdef inline int interrupt_raise(Interrupt* it) except -1:
    """After the parallel region: re-raise what stopped the kernel, if anything
    (a signal handler's exception first, then MemoryError for scratch space)."""
    if not it.stop:
        return 0
    if it.exc_type != NULL:
        PyErr_Restore(it.exc_type, it.exc_value, it.exc_traceback)
    elif it.no_memory:
        PyErr_SetString(MemoryError, b"could not allocate the kernel's per-thread scratch space")
    else:
        PyErr_SetNone(KeyboardInterrupt)
    it.exc_type = NULL
    it.exc_value = NULL
    it.exc_traceback = NULL
    return -1
