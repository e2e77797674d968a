// TileMatrix: pinned tile storage, per-tile StarPU handles, LAPACK layout conversion.
#include "tile_algorithms/tile_matrix.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/parallel.hpp"
#include "common/runtime.hpp"

namespace starfact {

template <class T>
void TileMatrix<T>::set_shape(int m, int n, int nb) {
    require(m >= 0, "m", fmt::format("must be >= 0, got {}", m));
    require(n >= 0, "n", fmt::format("must be >= 0, got {}", n));
    require(nb >= 1, "nb", fmt::format("must be >= 1, got {}", nb));
    const long long tile = max_tile_elements(m, n, nb);
    require(tile <= std::numeric_limits<int>::max(), "nb",
            fmt::format("{}: a tile of the {} x {} matrix would hold {} elements, beyond the 2^31-1 that LAPACK, "
                        "cuBLAS and StarPU take for one tile; use a smaller nb",
                        nb, m, n, tile));
    if (!Runtime::active()) throw RuntimeError("TileMatrix needs a running starfact::Runtime");
    m_ = m;
    n_ = n;
    nb_ = nb;
    mt_ = static_cast<int>((static_cast<long long>(m) + nb - 1) / nb);
    nt_ = static_cast<int>((static_cast<long long>(n) + nb - 1) / nb);
    bytes_ = static_cast<std::size_t>(m) * static_cast<std::size_t>(n) * sizeof(T);
}

template <class T>
void TileMatrix<T>::register_tiles() {
    handles_.resize(static_cast<std::size_t>(mt_) * nt_);
    for (int j = 0; j < nt_; ++j)
        for (int i = 0; i < mt_; ++i) {
            starpu_data_handle_t* h = &handles_[i + static_cast<std::size_t>(j) * mt_];
            // The same layout in a tile column's GPU allocation as in the host storage.
            const std::size_t offset = tile_offset(m_, n_, nb_, i, j) - tile_offset(m_, n_, nb_, 0, j);
            if (on_gpus())
                starpu_matrix_data_register(h, static_cast<int>(device_columns_[j].node),
                                            device_columns_[j].ptr + offset * sizeof(T), tile_m(i), tile_m(i),
                                            tile_n(j), sizeof(T));
            else
                starpu_matrix_data_register(h, STARPU_MAIN_RAM,
                                            reinterpret_cast<uintptr_t>(storage_ + tile_offset(m_, n_, nb_, i, j)),
                                            tile_m(i), tile_m(i), tile_n(j), sizeof(T));
        }
}

template <class T>
TileMatrix<T>::TileMatrix(int m, int n, int nb) {
    set_shape(m, n, nb);
    if (bytes_ > 0) {
        // Pinned when CUDA workers exist, so that transfers are asynchronous.
        pieces_ = pin_piece_ends(m, n, nb);
        storage_ = static_cast<T*>(host_matrix_alloc(bytes_, pieces_, pin_));
    }
    register_tiles();
}

template <class T>
TileMatrix<T>::TileMatrix(Wrapped, T* storage, int m, int n, int nb) {
    set_shape(m, n, nb);
    require(storage != nullptr || bytes_ == 0, "storage", "null pointer for a non-empty matrix");
    storage_ = storage;
    owns_storage_ = false;
    register_tiles();
}

template <class T>
TileMatrix<T> TileMatrix<T>::wrap(T* storage, int m, int n, int nb) {
    return TileMatrix(Wrapped{}, storage, m, n, nb);
}

template <class T>
TileMatrix<T>::TileMatrix(OnGpus, int m, int n, int nb) {
    set_shape(m, n, nb);
    owns_storage_ = false;
    std::vector<unsigned> nodes;  // the GPUs' memory nodes (several workers may share one)
    for (unsigned w = 0; w < starpu_worker_get_count(); ++w)
        if (starpu_worker_get_type(static_cast<int>(w)) == STARPU_CUDA_WORKER) {
            const unsigned node = starpu_worker_get_memory_node(w);
            if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
        }
    if (nodes.empty()) throw RuntimeError("a TileMatrix in GPU memory needs a CUDA worker");
    for (int j = 0; j < nt_; ++j) {
        const unsigned node = nodes[static_cast<std::size_t>(j) % nodes.size()];
        const std::size_t bytes = static_cast<std::size_t>(m_) * static_cast<std::size_t>(tile_n(j)) * sizeof(T);
        const uintptr_t ptr = bytes > 0 ? starpu_malloc_on_node(node, bytes) : 0;
        if (bytes > 0 && ptr == 0) {
            release();
            throw RuntimeError(fmt::format("cannot allocate {:.2f} GiB of GPU memory for tile column {} of a {} x {} "
                                           "matrix",
                                           static_cast<double>(bytes) / (1 << 30), j, m, n));
        }
        device_columns_.push_back({node, ptr, bytes});
    }
    register_tiles();
}

template <class T>
TileMatrix<T> TileMatrix<T>::on_gpus(int m, int n, int nb) {
    return TileMatrix(OnGpus{}, m, n, nb);
}

// Tile columns 0..j-1 hold nb columns of m elements each; inside tile column j, tiles 0..i-1
// hold nb rows of tile_n(j) columns each. Every product is formed in 64 bits.
template <class T>
std::size_t TileMatrix<T>::tile_offset(int m, int n, int nb, int i, int j) {
    const std::size_t tn = static_cast<std::size_t>(tile_extent(n, nb, j));
    return static_cast<std::size_t>(j) * static_cast<std::size_t>(nb) * static_cast<std::size_t>(m) +
           static_cast<std::size_t>(i) * static_cast<std::size_t>(nb) * tn;
}

template <class T>
std::vector<std::size_t> TileMatrix<T>::pin_piece_ends(int m, int n, int nb) {
    std::vector<std::size_t> ends;
    if (m <= 0 || n <= 0 || nb <= 0) return ends;
    const int mt = static_cast<int>((static_cast<long long>(m) + nb - 1) / nb);
    const int nt = static_cast<int>((static_cast<long long>(n) + nb - 1) / nb);
    std::size_t start = 0;
    // Storage order: tile column after tile column, tile after tile inside a column.
    for (int j = 0; j < nt; ++j)
        for (int i = 0; i < mt; ++i) {
            const std::size_t end = (tile_offset(m, n, nb, i, j) + static_cast<std::size_t>(tile_extent(m, nb, i)) *
                                                                      static_cast<std::size_t>(tile_extent(n, nb, j))) *
                                    sizeof(T);
            if (end - start >= kPinPiece || (j == nt - 1 && i == mt - 1)) {
                ends.push_back(end);
                start = end;
            }
        }
    return ends;
}

template <class T>
long long TileMatrix<T>::max_tile_elements(int m, int n, int nb) {
    return static_cast<long long>(std::min(nb, m)) * std::min(nb, n);
}

template <class T>
void TileMatrix<T>::release() noexcept {
    for (starpu_data_handle_t h : handles_) starpu_data_unregister(h);
    handles_.clear();
    if (storage_ && owns_storage_) host_matrix_free(storage_, bytes_, pieces_, pin_);
    storage_ = nullptr;
    for (const DeviceColumn& c : device_columns_)
        if (c.ptr != 0) starpu_free_on_node(c.node, c.ptr, c.bytes);
    device_columns_.clear();
}

template <class T>
TileMatrix<T>::~TileMatrix() {
    release();
}

template <class T>
TileMatrix<T>::TileMatrix(TileMatrix&& o) noexcept
    : m_(o.m_), n_(o.n_), nb_(o.nb_), mt_(o.mt_), nt_(o.nt_), storage_(o.storage_), owns_storage_(o.owns_storage_),
      pin_(o.pin_), pieces_(std::move(o.pieces_)), bytes_(o.bytes_), device_columns_(std::move(o.device_columns_)),
      handles_(std::move(o.handles_)) {
    o.storage_ = nullptr;
    o.device_columns_.clear();
    o.handles_.clear();
    o.m_ = o.n_ = o.mt_ = o.nt_ = 0;
}

template <class T>
TileMatrix<T>& TileMatrix<T>::operator=(TileMatrix&& o) noexcept {
    if (this != &o) {
        release();
        m_ = o.m_, n_ = o.n_, nb_ = o.nb_, mt_ = o.mt_, nt_ = o.nt_;
        storage_ = o.storage_;
        owns_storage_ = o.owns_storage_;
        pin_ = o.pin_;
        pieces_ = std::move(o.pieces_);
        bytes_ = o.bytes_;
        device_columns_ = std::move(o.device_columns_);
        handles_ = std::move(o.handles_);
        o.storage_ = nullptr;
        o.device_columns_.clear();
        o.handles_.clear();
        o.m_ = o.n_ = o.mt_ = o.nt_ = 0;
    }
    return *this;
}

template <class T>
void TileMatrix<T>::copy_lapack(T* A, int lda, bool into_tiles) const {
    require(lda >= std::max(1, m_), "lda", fmt::format("must be >= max(1, m) = {}, got {}", std::max(1, m_), lda));
    require(A != nullptr || m_ * static_cast<long>(n_) == 0, "A", "null pointer for a non-empty matrix");
    // One tile column per thread: copying gigabytes takes seconds on one core.
    parallel_for(nt_, [&](int j) {
        for (int i = 0; i < mt_; ++i) {
            starpu_data_handle_t h = (*this)(i, j);
            // In main memory, not at the home node (a GPU for on_gpus()).
            starpu_data_acquire_on_node(h, STARPU_MAIN_RAM, into_tiles ? STARPU_W : STARPU_R);
            const int tm = tile_m(i);
            // Where the tile lies in main memory now (StarPU's copy for a tile homed on a GPU).
            T* tile = reinterpret_cast<T*>(starpu_matrix_get_local_ptr(h));
            const std::size_t ld = starpu_matrix_get_local_ld(h);
            for (int c = 0; c < tile_n(j); ++c) {
                T* tile_col = tile + static_cast<std::size_t>(c) * ld;
                T* lapack_col = A + static_cast<std::size_t>(i) * nb_ + (static_cast<std::size_t>(j) * nb_ + c) * lda;
                if (into_tiles)
                    std::memcpy(tile_col, lapack_col, sizeof(T) * tm);
                else
                    std::memcpy(lapack_col, tile_col, sizeof(T) * tm);
            }
            starpu_data_release_on_node(h, STARPU_MAIN_RAM);
        }
    });
}

template <class T>
void TileMatrix<T>::from_lapack(const T* A, int lda) {
    // A is only read: copy_lapack writes through it only when copying out of the tiles.
    copy_lapack(const_cast<T*>(A), lda, true);
}

template <class T>
void TileMatrix<T>::to_lapack(T* A, int lda) const {
    copy_lapack(A, lda, false);
}

template <class T>
void TileMatrix<T>::fetch_to(unsigned node) const {
    for (starpu_data_handle_t h : handles_) starpu_data_fetch_on_node(h, node, 1);
    for (starpu_data_handle_t h : handles_) starpu_data_fetch_on_node(h, node, 0);
}

template class TileMatrix<float>;
template class TileMatrix<double>;

// ---- InfoVector ---------------------------------------------------------------------------
InfoVector::InfoVector(int count) : handles_(static_cast<std::size_t>(std::max(count, 0))) {
    if (count <= 0) return;
    void* p = nullptr;
    if (starpu_malloc(&p, sizeof(int) * count) != 0) throw RuntimeError("cannot allocate the info vector");
    values_ = static_cast<int*>(p);
    for (int k = 0; k < count; ++k) {
        values_[k] = 0;
        starpu_variable_data_register(&handles_[k], STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(values_ + k),
                                      sizeof(int));
    }
}

InfoVector::~InfoVector() {
    for (starpu_data_handle_t h : handles_) starpu_data_unregister(h);
    if (values_) starpu_free(values_);
}

int InfoVector::global_info(int nb) const {
    int info = 0;
    for (std::size_t k = 0; k < handles_.size(); ++k) {
        starpu_data_acquire(handles_[k], STARPU_R);
        const int local = values_[k];
        starpu_data_release(handles_[k]);
        if (local > 0 && info == 0) info = static_cast<int>(k) * nb + local;
    }
    return info;
}

}  // namespace starfact
