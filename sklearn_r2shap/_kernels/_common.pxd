# The preamble the kernels share (doc/contributing.rst, "Blocks, threads and
# identical results"): per-thread scratch space, a block of rows' patterns
# at a tree's leaves, and the pattern tables' row loop. Inline only: no
# module of its own.
#
# Per-thread scratch. Every kernel's parallel region reads
#
#     cdef Interrupt stop = interrupt_new()
#     with nogil, parallel(num_threads=n_threads):
#         mem = buffers_new()
#         a = <double*> take(&mem, n * sizeof(double))   # as many as it needs
#         scratch_ready(&stop, &mem)
#         for bi in prange(n_blocks, schedule="dynamic"):
#             if interrupted(&stop):
#                 continue
#             ...
#         buffers_free(&mem)
#     interrupt_raise(&stop)   # KeyboardInterrupt, or MemoryError for scratch
#
# A struct of scratch arrays holds its own ``Buffers``, so its fields are
# listed once (where they are taken); its failure check and free are the
# ``Buffers``'.
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport malloc, free

from cython.parallel cimport parallel, prange

from ._forest cimport (
    Forest, Interrupt, Patterns, interrupt_new, interrupt_no_memory, interrupt_raise, interrupted,
    row_patterns,
)

cdef enum:
    MAX_BUFFERS = 16


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


cdef inline int pattern_blocks(
    const Forest* f, const Patterns* p, const double[:, ::1] rows, const int64_t[::1] tree_list,
    int64_t block, bint stumps, size_t scratch_bytes, BlockWork run, void* work, int n_threads,
) except -1:
    """``run(work, f[0], tb)`` for every block of ``rows`` and every tree of
    ``tree_list`` (one-leaf trees only if ``stumps``), ``tb`` holding the
    rows' patterns at the tree's leaves and the thread's scratch.
    KeyboardInterrupt between blocks, MemoryError for scratch."""
    cdef int64_t n_rows = rows.shape[0]
    cdef int64_t stride = rows.shape[1]
    cdef int64_t n_trees = tree_list.shape[0]
    cdef const double* X = &rows[0, 0]
    cdef const int64_t* trees = &tree_list[0]
    cdef int64_t n_blocks = (n_rows + block - 1) // block
    cdef int64_t ti, t, i0, i1
    cdef Py_ssize_t bi
    cdef uint8_t* left_taken
    cdef uint64_t* pattern
    cdef uint64_t* leaf_pattern
    cdef void* scratch
    cdef TreeBlock tb
    cdef Buffers mem
    cdef Interrupt stop = interrupt_new()
    if n_rows == 0 or n_trees == 0:
        return 0
    with nogil, parallel(num_threads=n_threads):
        mem = buffers_new()
        left_taken = <uint8_t*> take(&mem, f.max_tree_nodes * sizeof(uint8_t))
        pattern = <uint64_t*> take(&mem, f.max_tree_nodes * sizeof(uint64_t))
        leaf_pattern = <uint64_t*> take(&mem, block * p.max_leaves * sizeof(uint64_t))
        scratch = take(&mem, scratch_bytes)
        scratch_ready(&stop, &mem)
        for bi in prange(n_blocks, schedule="dynamic"):
            if interrupted(&stop):
                continue
            i0 = bi * block
            i1 = min(i0 + block, n_rows)
            for ti in range(n_trees):
                t = trees[ti]
                if not stumps and f.tree_start[t + 1] - f.tree_start[t] == 1:
                    continue
                tb = TreeBlock(t=t, i0=i0, i1=i1, first_leaf=p.tree_leaf_start[t],
                               n_leaves=p.tree_leaf_start[t + 1] - p.tree_leaf_start[t],
                               leaf_pattern=leaf_pattern, scratch=scratch)
                block_leaf_patterns(f, t, X + i0 * stride, stride, i1 - i0, p.node_slot,
                                    &p.leaf_node[tb.first_leaf], tb.n_leaves, left_taken,
                                    pattern, leaf_pattern)
                run(work, f[0], tb)
        buffers_free(&mem)
    interrupt_raise(&stop)
    return 0
