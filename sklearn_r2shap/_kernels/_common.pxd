# The preamble the kernels share (doc/contributing.rst, "Blocks, threads and
# identical results"): per-thread scratch space, and a block of rows'
# patterns at a tree's leaves. Inline only: no module of its own.
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

from ._forest cimport Forest, Interrupt, interrupt_no_memory, row_patterns

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


# A block of rows' patterns at the leaves of one tree at a time (the pattern
# tables' route: per tree, every row's pattern at every leaf, then leaf by
# leaf so that a leaf's table stays in cache while the block's rows read it).
cdef struct BlockPatterns:
    uint8_t* left_taken      # per node (row_patterns)
    uint64_t* pattern        # per node
    uint64_t* leaf_pattern   # (rows of the block, leaves of the tree)
    Buffers mem              # owns the arrays above


cdef inline BlockPatterns block_patterns_new(const Forest* f, int64_t block,
                                             int64_t max_leaves) noexcept nogil:
    cdef BlockPatterns bp
    bp.mem = buffers_new()
    bp.left_taken = <uint8_t*> take(&bp.mem, f.max_tree_nodes * sizeof(uint8_t))
    bp.pattern = <uint64_t*> take(&bp.mem, f.max_tree_nodes * sizeof(uint64_t))
    bp.leaf_pattern = <uint64_t*> take(&bp.mem, block * max_leaves * sizeof(uint64_t))
    return bp


cdef inline int64_t tree_block_patterns(
    const Forest* f, int64_t t, const double* X, int64_t stride, int64_t i0, int64_t i1,
    const int64_t* node_slot, const int64_t* leaf_node, const int64_t* tree_leaf_start,
    BlockPatterns* bp,
) noexcept nogil:
    """Fill ``bp.leaf_pattern`` for rows ``i0:i1`` of ``X`` at the leaves of
    tree ``t`` (``tree_leaf_start``, ``leaf_node``: the pattern structure's);
    returns the tree's number of leaves."""
    cdef int64_t first = tree_leaf_start[t]
    cdef int64_t n_leaves = tree_leaf_start[t + 1] - first
    block_leaf_patterns(f, t, X + i0 * stride, stride, i1 - i0, node_slot, &leaf_node[first],
                        n_leaves, bp.left_taken, bp.pattern, bp.leaf_pattern)
    return n_leaves
