# The preamble the kernels share (doc/contributing.rst, "Blocks, threads and
# identical results"): per-thread scratch space, the one parallel loop
# (``parallel_units``), a block of rows' patterns at a tree's leaves, and the
# pattern tables' row loop built on it. Inline only: no module of its own.
#
# Every kernel's parallel work is ``parallel_units``: units (rows, leaves,
# trees, blocks of rows) in chunks taken by the threads in turn, each thread
# with the scratch its hook takes from its own ``Buffers``; KeyboardInterrupt
# between chunks, MemoryError for scratch. A kernel writes a struct of what
# its work reads (``work``) and two functions:
#
#     cdef void* my_scratch(void* work, Buffers* mem) noexcept nogil:
#         return take(mem, n * sizeof(double))     # or a struct of arrays (take_each)
#
#     cdef void my_rows(void* work, int64_t lo, int64_t hi, void* scratch,
#                       Interrupt* stop) noexcept nogil:
#         ...        # units lo:hi; a long unit polls interrupted(stop)
#
#     parallel_units(n_rows, chunk, my_scratch, my_rows, &work, n_threads)
#
# A unit writes its own results only, so the values do not depend on the
# threads or the chunk. The work function copies the work struct and its
# scratch struct into locals, as the loops it replaced kept them, so that a
# store into a result cannot change what the loops read. Each scratch array
# is a take of its own: one allocation cut into the pattern tables' three
# arrays made their bulk loop 20% slower on 2 threads.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, free

from cython.parallel cimport parallel, prange

from ._forest cimport (
    Forest, Interrupt, Patterns, interrupt_new, interrupt_no_memory, interrupt_raise, interrupted,
    row_patterns,
)

cdef enum:
    MAX_BUFFERS = 32


cdef struct Buffers:
    void* ptr[MAX_BUFFERS]
    int n
    int failed


cdef inline Buffers buffers_new() noexcept nogil:
    cdef Buffers b
    cdef int k
    for k in range(MAX_BUFFERS):
        b.ptr[k] = NULL
    b.n = 0
    b.failed = 0
    return b


cdef inline void* take(Buffers* b, size_t nbytes) noexcept nogil:
    """``nbytes`` of scratch owned by ``b`` (NULL, and ``b`` failed, if not)."""
    cdef void* p
    if b.n == MAX_BUFFERS:
        b.failed = 1
        return NULL
    p = malloc(nbytes if nbytes > 0 else 1)
    if p == NULL:
        b.failed = 1
        return NULL
    b.ptr[b.n] = p
    b.n += 1
    return p


ctypedef fused Element:
    uint8_t
    int32_t
    uint32_t
    int64_t
    uint64_t
    double
    double complex


cdef inline void take_each(Buffers* mem, size_t n, Element** a0, Element** a1=NULL,
                           Element** a2=NULL, Element** a3=NULL, Element** a4=NULL,
                           Element** a5=NULL) noexcept nogil:
    """Arrays of ``n`` elements each into ``*a0``, ``*a1``, ... (those given),
    a take each."""
    cdef Element** arrays[6]
    cdef int k
    arrays[0], arrays[1], arrays[2], arrays[3], arrays[4], arrays[5] = a0, a1, a2, a3, a4, a5
    for k in range(6):
        if arrays[k] != NULL:
            arrays[k][0] = <Element*> take(mem, n * sizeof(Element))


cdef inline void buffers_free(Buffers* b) noexcept nogil:
    cdef int k
    for k in range(b.n):
        free(b.ptr[k])
    b.n = 0


cdef inline bint scratch_ready(Interrupt* stop, const Buffers* b) noexcept nogil:
    """False, and every thread stops (MemoryError after the region), if any of
    this thread's ``take`` failed."""
    if b.failed:
        interrupt_no_memory(stop)
        return False
    return True


# This thread's scratch, taken from ``mem`` (NULL: none, or a failed take).
ctypedef void* (*TakeScratch)(void* work, Buffers* mem) noexcept nogil
# The work on units lo:hi with this thread's scratch; a unit of long work
# polls ``interrupted(stop)`` and returns early when it is true.
ctypedef void (*UnitsWork)(void* work, int64_t lo, int64_t hi, void* scratch,
                           Interrupt* stop) noexcept nogil


cdef inline void* bytes_scratch(void* work, Buffers* mem) noexcept nogil:
    """A TakeScratch: one array of as many bytes as the work struct's first
    field (a size_t) says."""
    return take(mem, (<const size_t*> work)[0])


cdef inline int parallel_units(
    int64_t n_units, int64_t chunk, TakeScratch take_scratch, UnitsWork run, void* work,
    int n_threads,
) except -1:
    """``run(work, lo, hi, scratch, stop)`` for units 0:n_units in chunks of ``chunk``
    (the last may be shorter), each chunk by one thread (OpenMP dynamic
    schedule) with the scratch ``take_scratch`` took for it once (none if
    NULL). KeyboardInterrupt between chunks; MemoryError if a take failed."""
    cdef int64_t n_chunks = (n_units + chunk - 1) // chunk if n_units > 0 else 0
    cdef Py_ssize_t c
    cdef void* scratch
    cdef Buffers mem
    cdef Interrupt stop = interrupt_new()
    if n_chunks == 0:
        return 0
    with nogil, parallel(num_threads=n_threads):
        mem = buffers_new()
        scratch = NULL
        if take_scratch != NULL:
            scratch = take_scratch(work, &mem)
        scratch_ready(&stop, &mem)
        for c in prange(n_chunks, schedule="dynamic"):
            if interrupted(&stop):
                continue
            run(work, c * chunk, min((c + 1) * chunk, n_units), scratch, &stop)
        buffers_free(&mem)
    interrupt_raise(&stop)
    return 0


# The rows of a C-contiguous float64 matrix (a kernel's X, or background rows).
cdef struct Rows:
    const double* data
    int64_t stride  # doubles from a row to the next
    int64_t n


cdef inline Rows rows_of(const double[:, ::1] X):
    return Rows(data=&X[0, 0], stride=X.shape[1], n=X.shape[0])


cdef inline const double* row_at(const Rows* rows, int64_t i) noexcept nogil:
    return rows.data + i * rows.stride


# The tables a kernel builds for selected leaves (or units): entry i (of
# selected[i]) fills the block from data[start[i]] on.
cdef struct Tables:
    const int64_t* selected
    const int64_t* start
    double* data


cdef inline Tables tables_of(const int64_t[::1] selected, const int64_t[::1] start,
                             double[::1] data):
    return Tables(selected=&selected[0], start=&start[0], data=&data[0])


# Quadrature rules on (0, 1), one per row of two matrices: rule r has size[r]
# nodes, points[r stride:r stride + size[r]] with their weights (size NULL:
# rule r has r + 1 nodes, as ``_qshap._tree_rules`` lays them out).
cdef struct Rules:
    const double* points
    const double* weights
    const int64_t* size
    int64_t stride


cdef inline Rules rules_of(const double[:, ::1] points, const double[:, ::1] weights,
                           const int64_t* size):
    return Rules(points=&points[0, 0], weights=&weights[0, 0], size=size,
                 stride=points.shape[1])


cdef inline int64_t widest(const int64_t* start, int64_t n_starts) noexcept nogil:
    """The largest ``start[k + 1] - start[k]`` (at least 1): e.g. the most
    leaves of a tree, from ``tree_leaf_start``."""
    cdef int64_t k
    cdef int64_t most = 1
    for k in range(n_starts - 1):
        if start[k + 1] - start[k] > most:
            most = start[k + 1] - start[k]
    return most


cdef inline void block_leaf_patterns(
    const Forest* f, int64_t t, const double* X, int64_t stride, int64_t n_rows,
    const int64_t* node_slot, const int64_t* leaf_node, int64_t n_leaves,
    uint8_t* left_taken, uint64_t* pattern, uint64_t* leaf_pattern,
) noexcept nogil:
    """``leaf_pattern[r * n_leaves + l]``: the pattern (``row_patterns``) of
    row r of ``X`` (``n_rows`` rows, ``stride`` apart) at leaf l of tree
    ``t``, whose node is ``leaf_node[l]`` (global index)."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t r, lv
    for r in range(n_rows):
        row_patterns(f, t, X + r * stride, node_slot, left_taken, pattern)
        for lv in range(n_leaves):
            leaf_pattern[r * n_leaves + lv] = pattern[leaf_node[lv] - start]


# A kernel's results: (n_rows, n_outputs, width), C-contiguous (width: the
# players, or (p + 1)^2 for interaction matrices).
cdef struct Outputs:
    double* data
    int64_t n_outputs
    int64_t width


cdef inline double* output_row(const Outputs* out, int64_t i, int64_t o) noexcept nogil:
    """Row i's values of output o."""
    return out.data + (i * out.n_outputs + o) * out.width


# The pattern tables' row loop, written once: rows in blocks of ``block``, in
# parallel; per block, tree by tree, every row's pattern at every leaf of the
# tree (``block_leaf_patterns``), then a kernel's work on the block, which
# reads the tree's tables leaf by leaf (or unit by unit) so that a table
# stays in cache while the block's rows read it. A row adds its trees in
# order, whatever the block size and the threads.
cdef struct TreeBlock:
    int64_t t                     # the tree
    int64_t i0                    # its rows i0:i1
    int64_t i1
    int64_t first_leaf            # the pattern structure's index of the tree's leaf 0
    int64_t n_leaves
    const uint64_t* leaf_pattern  # row i's pattern at leaf lv: [(i - i0) n_leaves + lv]
    void* scratch                 # this thread's scratch_bytes


# by value: the work's own copies, whose fields stay in registers (no store
# through a pointer can change them)
ctypedef void (*BlockWork)(void* work, Forest f, TreeBlock tb) noexcept nogil


cdef struct BlockLoop:
    const Forest* f
    const Patterns* p
    Rows rows
    const int64_t* trees
    int64_t n_trees
    int64_t block
    bint stumps
    size_t scratch_bytes
    BlockWork run
    void* work


cdef struct BlockScratch:
    uint8_t* left_taken
    uint64_t* pattern
    uint64_t* leaf_pattern
    void* scratch


cdef inline void* block_scratch(void* work, Buffers* mem) noexcept nogil:
    cdef const BlockLoop* w = <const BlockLoop*> work
    cdef BlockScratch* s = <BlockScratch*> take(mem, sizeof(BlockScratch))
    if s == NULL:
        return NULL
    take_each(mem, w.f.max_tree_nodes, &s.left_taken)
    take_each(mem, w.f.max_tree_nodes, &s.pattern)
    take_each(mem, w.block * w.p.max_leaves, &s.leaf_pattern)
    s.scratch = take(mem, w.scratch_bytes)
    return s


cdef inline void row_blocks(void* work, int64_t lo, int64_t hi, void* scratch,
                            Interrupt* stop) noexcept nogil:
    """Blocks lo:hi of rows, tree by tree."""
    cdef BlockLoop w = (<const BlockLoop*> work)[0]
    cdef const BlockScratch* s = <const BlockScratch*> scratch
    cdef const Forest* f = w.f
    cdef int64_t bi, ti, t, i0, i1
    cdef TreeBlock tb
    for bi in range(lo, hi):
        i0 = bi * w.block
        i1 = min(i0 + w.block, w.rows.n)
        for ti in range(w.n_trees):
            t = w.trees[ti]
            if not w.stumps and f.tree_start[t + 1] - f.tree_start[t] == 1:
                continue
            tb = TreeBlock(t=t, i0=i0, i1=i1, first_leaf=w.p.tree_leaf_start[t],
                           n_leaves=w.p.tree_leaf_start[t + 1] - w.p.tree_leaf_start[t],
                           leaf_pattern=s.leaf_pattern, scratch=s.scratch)
            block_leaf_patterns(f, t, row_at(&w.rows, i0), w.rows.stride, i1 - i0,
                                w.p.node_slot, &w.p.leaf_node[tb.first_leaf], tb.n_leaves,
                                s.left_taken, s.pattern, s.leaf_pattern)
            w.run(w.work, f[0], tb)


cdef inline int pattern_blocks(
    const Forest* f, const Patterns* p, const double[:, ::1] rows, const int64_t[::1] tree_list,
    int64_t block, bint stumps, size_t scratch_bytes, BlockWork run, void* work, int n_threads,
) except -1:
    """``run(work, f[0], tb)`` for every block of ``rows`` and every tree of
    ``tree_list`` (one-leaf trees only if ``stumps``), ``tb`` holding the
    rows' patterns at the tree's leaves and the thread's scratch; a block
    is a unit of ``parallel_units``."""
    cdef BlockLoop loop
    if rows.shape[0] == 0 or tree_list.shape[0] == 0:
        return 0
    loop = BlockLoop(f=f, p=p, rows=rows_of(rows),
                     trees=&tree_list[0], n_trees=tree_list.shape[0], block=block,
                     stumps=stumps, scratch_bytes=scratch_bytes, run=run, work=work)
    return parallel_units((loop.rows.n + block - 1) // block, 1, block_scratch, row_blocks,
                          &loop, n_threads)
