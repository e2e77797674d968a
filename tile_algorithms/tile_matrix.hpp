// TileMatrix<T>: an m x n matrix stored as nb x nb tiles in pinned memory (common/pinned.hpp), or in GPU memory, one StarPU handle per tile; edge tiles are smaller when m or n is not a multiple of nb.
#pragma once

#include <starpu.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/pinned.hpp"

namespace starfact {

template <class T>
class TileMatrix {
public:
    /// An m x n matrix in nb x nb tiles (m, n >= 0, nb >= 1), uninitialised. A Runtime must
    /// exist; the TileMatrix must be destroyed before it. Element counts and offsets are 64-bit:
    /// m * n may pass 2^31 (n = 100000 is fine). Each tile's LAPACK, cuBLAS and StarPU calls take
    /// 32-bit sizes, so a tile, min(nb, m) x min(nb, n), must hold at most 2^31-1 elements.
    /// Throws ArgumentError on bad sizes (naming "nb" for a tile too large).
    TileMatrix(int m, int n, int nb);
    /// Wraps storage the caller owns that is already in this class's tile layout: tile column
    /// after tile column, inside tile column j tile i after tile i-1, each tile column-major
    /// with ld = tile_m(i), so tile (i, j) starts at `storage + tile_offset(m, n, nb, i, j)`;
    /// m * n elements in all. Nothing is copied. The caller keeps ownership, keeps the storage
    /// alive until the TileMatrix is destroyed (which writes every tile back to it) and does
    /// not touch it meanwhile. Pin it (starpu_malloc, or cudaHostRegister) for asynchronous
    /// GPU transfers. Throws ArgumentError on bad sizes or a null storage for a non-empty
    /// matrix.
    static TileMatrix wrap(T* storage, int m, int n, int nb);
    /// An m x n matrix in nb x nb tiles stored in GPU memory, uninitialised: tile column j on
    /// the j-th GPU modulo their count (one starpu_malloc_on_node allocation per tile column,
    /// counted by StarPU against STARPU_LIMIT_CUDA_MEM), each tile's home there. Nothing lives
    /// in main memory unless a CPU task or an acquisition there needs a copy, and StarPU never
    /// writes a tile back (or evicts it) to main memory. For matrices generated where they are
    /// factored (generate_tiles). Throws ArgumentError on bad sizes, RuntimeError without a
    /// CUDA worker or when the GPUs' memory cannot hold it (nothing is held then).
    static TileMatrix on_gpus(int m, int n, int nb);
    /// Whether the tiles live in GPU memory (on_gpus()).
    bool on_gpus() const { return !device_columns_.empty(); }
    /// Where tile (i, j) of an m x n matrix in nb x nb tiles starts, in elements from the
    /// start of the storage (the layout that wrap() expects and the constructor allocates).
    static std::size_t tile_offset(int m, int n, int nb, int i, int j);
    /// Rows of tile row k (or columns of tile column k) of a dimension of `size` in tiles of
    /// nb: nb, except for the last tile, which holds the rest (0 <= k < ceil(size / nb)).
    static int tile_extent(int size, int nb, int k) { return std::min(nb, size - k * nb); }
    /// Elements of the largest tile, min(nb, m) * min(nb, n), in 64 bits: the constructor and
    /// wrap() refuse more than 2^31-1.
    static long long max_tile_elements(int m, int n, int nb);
    /// The pieces the storage is pinned in (common/pinned.hpp), as byte offsets where each
    /// ends: runs of whole consecutive tiles of about kPinPiece bytes or more (a larger tile is
    /// a piece alone), so that no tile's transfer crosses from one pinned range to the next.
    static std::vector<std::size_t> pin_piece_ends(int m, int n, int nb);
    ~TileMatrix();
    TileMatrix(TileMatrix&& other) noexcept;
    TileMatrix& operator=(TileMatrix&& other) noexcept;
    TileMatrix(const TileMatrix&) = delete;
    TileMatrix& operator=(const TileMatrix&) = delete;

    int m() const { return m_; }
    int n() const { return n_; }
    int nb() const { return nb_; }
    int mt() const { return mt_; }  ///< tile rows
    int nt() const { return nt_; }  ///< tile columns
    int tile_m(int i) const { return tile_extent(m_, nb_, i); }
    int tile_n(int j) const { return tile_extent(n_, nb_, j); }

    /// The StarPU handle of tile (i, j).
    starpu_data_handle_t operator()(int i, int j) const { return handles_[i + static_cast<std::size_t>(j) * mt_]; }

    /// Copies A (column-major, lda >= max(1, m)) into the tiles. Waits for tasks using them.
    void from_lapack(const T* A, int lda);
    /// Copies the tiles into A (column-major, lda >= max(1, m)). Waits for tasks writing them.
    void to_lapack(T* A, int lda) const;
    /// Moves every tile onto StarPU memory node `node` (e.g. a GPU's) and waits; benchmarks
    /// use it to start from device-resident data like the vendor library they compare with.
    void fetch_to(unsigned node) const;

private:
    struct Wrapped {};
    struct OnGpus {};
    TileMatrix(Wrapped, T* storage, int m, int n, int nb);
    TileMatrix(OnGpus, int m, int n, int nb);
    void set_shape(int m, int n, int nb);
    void register_tiles();
    void release() noexcept;
    /// The copy behind from_lapack (into_tiles) and to_lapack, one tile column per thread.
    void copy_lapack(T* A, int lda, bool into_tiles) const;

    int m_ = 0, n_ = 0, nb_ = 1, mt_ = 0, nt_ = 0;
    T* storage_ = nullptr;
    bool owns_storage_ = true;
    PinMode pin_ = PinMode::Whole;
    std::vector<std::size_t> pieces_;
    std::size_t bytes_ = 0;
    /// on_gpus(): per tile column, the GPU memory node, allocation and its size.
    struct DeviceColumn {
        unsigned node;
        uintptr_t ptr;
        std::size_t bytes;
    };
    std::vector<DeviceColumn> device_columns_;
    std::vector<starpu_data_handle_t> handles_;
};

/// One int per diagonal tile, as StarPU data, for LAPACK-style info from factorization tasks.
class InfoVector {
public:
    explicit InfoVector(int count);
    ~InfoVector();
    InfoVector(const InfoVector&) = delete;
    InfoVector& operator=(const InfoVector&) = delete;
    starpu_data_handle_t operator[](int k) const { return handles_[k]; }
    /// Waits for the writers and returns the smallest global index nb*k + info_k over the
    /// tiles whose local info_k is nonzero (LAPACK's convention), or 0.
    int global_info(int nb) const;

private:
    int* values_ = nullptr;
    std::vector<starpu_data_handle_t> handles_;
};

}  // namespace starfact
