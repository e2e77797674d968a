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

// Pieces pinned by one call each: large enough that the per-call cost of the driver does not
// count, small enough that every core gets several.
constexpr std::size_t kPiece = std::size_t(256) << 20;
// Aligned to a huge page, so that the kernel can back the buffer with transparent huge pages
// (fewer faults, fewer pages to pin).
constexpr std::size_t kAlign = std::size_t(2) << 20;

std::size_t rounded(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::int64_t pieces(std::size_t bytes) { return static_cast<std::int64_t>((bytes + kPiece - 1) / kPiece); }

void unpin_pieces(char* base, std::size_t bytes, const std::atomic<bool>* pinned) {
    parallel_for64(pieces(bytes), [&](std::int64_t k) {
        if (pinned && !pinned[k].load()) return;
        const std::size_t off = static_cast<std::size_t>(k) * kPiece;
        starpu_memory_unpin(base + off, std::min(kPiece, bytes - off));
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

void* host_matrix_alloc(std::size_t bytes, PinMode& mode) {
    mode = host_pin_mode();
    // Without CUDA workers there is nothing to pin for (and cudaHostRegister would fail).
    if (mode == PinMode::Pieces && !(starpu_is_initialized() && starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) > 0))
        mode = PinMode::None;
    if (bytes == 0) return nullptr;
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
    const std::int64_t count = pieces(bytes);
    // Which pieces were pinned, so that a failure unpins exactly those.
    std::unique_ptr<std::atomic<bool>[]> pinned(new std::atomic<bool>[static_cast<std::size_t>(count)]);
    std::atomic<bool> failed{false};
    const long page = std::max(4096L, sysconf(_SC_PAGESIZE));
    parallel_for64(count, [&](std::int64_t k) {
        pinned[k] = false;
        if (failed.load()) return;
        const std::size_t off = static_cast<std::size_t>(k) * kPiece;
        const std::size_t len = std::min(kPiece, bytes - off);
        // Fault the pages here, on this core, before the driver pins them.
        for (std::size_t b = 0; b < len; b += static_cast<std::size_t>(page)) base[off + b] = 0;
        if (starpu_memory_pin(base + off, len) == 0)
            pinned[k] = true;
        else
            failed = true;
    });
    if (failed.load()) {
        unpin_pieces(base, bytes, pinned.get());
        std::free(p);
        throw fail("pin");
    }
    return p;
}

void host_matrix_free(void* p, std::size_t bytes, PinMode mode) noexcept {
    if (p == nullptr) return;
    switch (mode) {
        case PinMode::Whole:
            starpu_free(p);
            return;
        case PinMode::Pieces:
            unpin_pieces(static_cast<char*>(p), bytes, nullptr);
            std::free(p);
            return;
        case PinMode::None:
            std::free(p);
            return;
    }
}

}  // namespace starfact
