// Pinned host storage for matrices (common/pinned.hpp).
#include "common/pinned.hpp"

#include <starpu.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/parallel.hpp"

namespace starfact {
namespace {

// Aligned to a huge page, so that the kernel can back the buffer with transparent huge pages
// (fewer faults, fewer pages to pin).
constexpr std::size_t kAlign = std::size_t(2) << 20;
// The pages are faulted in chunks of this size, spread over the cores.
constexpr std::size_t kFaultChunk = std::size_t(64) << 20;

std::size_t rounded(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::size_t piece_start(const std::vector<std::size_t>& ends, std::int64_t k) {
    return k == 0 ? 0 : ends[static_cast<std::size_t>(k - 1)];
}

void unpin_pieces(char* base, const std::vector<std::size_t>& ends, const std::atomic<bool>* pinned) {
    parallel_for64(static_cast<std::int64_t>(ends.size()), [&](std::int64_t k) {
        if (pinned && !pinned[k].load()) return;
        const std::size_t off = piece_start(ends, k);
        starpu_memory_unpin(base + off, ends[static_cast<std::size_t>(k)] - off);
    });
}

}  // namespace

PinMode host_pin_mode() {
    if (const char* env = std::getenv("STARFACT_PIN"); env && *env) {
        const std::string v = env;
        if (v == "pieces") return PinMode::Pieces;
        if (v == "whole") return PinMode::Whole;
        if (v == "none") return PinMode::None;
        throw ArgumentError("STARFACT_PIN", fmt::format("'{}': expected pieces, whole or none", v));
    }
    return starpu_is_initialized() && starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) > 0 ? PinMode::Pieces
                                                                                              : PinMode::Whole;
}

void* host_matrix_alloc(std::size_t bytes, const std::vector<std::size_t>& piece_ends, PinMode& mode) {
    mode = host_pin_mode();
    // Without CUDA workers there is nothing to pin for (and cudaHostRegister would fail).
    if (mode == PinMode::Pieces && !(starpu_is_initialized() && starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) > 0))
        mode = PinMode::None;
    if (bytes == 0) return nullptr;
    if (mode == PinMode::Pieces) {
        bool ok = !piece_ends.empty() && piece_ends.back() == bytes;
        for (std::size_t k = 0; ok && k < piece_ends.size(); ++k) ok = piece_ends[k] > (k ? piece_ends[k - 1] : 0);
        if (!ok) throw ArgumentError("piece_ends", "must increase and end at the buffer's size");
    }
    const auto fail = [&](const char* what) {
        return RuntimeError(fmt::format("cannot {} {:.2f} GiB of host memory for a matrix", what,
                                        static_cast<double>(bytes) / (1 << 30)));
    };
    if (mode == PinMode::Whole) {
        void* p = nullptr;
        if (starpu_malloc(&p, bytes) != 0 || p == nullptr) throw fail("allocate");
        return p;
    }
    void* p = std::aligned_alloc(kAlign, rounded(bytes));
    if (p == nullptr) throw fail("allocate");
#ifdef MADV_HUGEPAGE
    madvise(p, rounded(bytes), MADV_HUGEPAGE);
#endif
    if (mode == PinMode::None) return p;
    char* base = static_cast<char*>(p);
    // Fault the pages on every core first: the driver's pinning then finds them present.
    const std::size_t page = static_cast<std::size_t>(std::max(4096L, sysconf(_SC_PAGESIZE)));
    parallel_for64(static_cast<std::int64_t>((bytes + kFaultChunk - 1) / kFaultChunk), [&](std::int64_t c) {
        const std::size_t off = static_cast<std::size_t>(c) * kFaultChunk;
        const std::size_t len = std::min(kFaultChunk, bytes - off);
        for (std::size_t b = 0; b < len; b += page) base[off + b] = 0;
    });
    const std::int64_t count = static_cast<std::int64_t>(piece_ends.size());
    // Which pieces were pinned, so that a failure unpins exactly those.
    std::unique_ptr<std::atomic<bool>[]> pinned(new std::atomic<bool>[static_cast<std::size_t>(count)]);
    for (std::int64_t k = 0; k < count; ++k) pinned[k] = false;
    std::atomic<bool> failed{false};
    parallel_for64(count, [&](std::int64_t k) {
        if (failed.load()) return;
        const std::size_t off = piece_start(piece_ends, k);
        if (starpu_memory_pin(base + off, piece_ends[static_cast<std::size_t>(k)] - off) == 0)
            pinned[k] = true;
        else
            failed = true;
    });
    if (failed.load()) {
        unpin_pieces(base, piece_ends, pinned.get());
        std::free(p);
        throw fail("pin");
    }
    return p;
}

void host_matrix_free(void* p, std::size_t bytes, const std::vector<std::size_t>& piece_ends, PinMode mode) noexcept {
    if (p == nullptr || bytes == 0) return;
    switch (mode) {
        case PinMode::Whole:
            starpu_free(p);
            return;
        case PinMode::Pieces:
            unpin_pieces(static_cast<char*>(p), piece_ends, nullptr);
            std::free(p);
            return;
        case PinMode::None:
            std::free(p);
            return;
    }
}

}  // namespace starfact
