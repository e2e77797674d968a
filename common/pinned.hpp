// Host memory for matrices the GPUs read: pinned, so that StarPU's transfers are asynchronous
// and run at the link's full rate, and allocated fast. cudaHostAlloc of tens of GiB faults,
// zeroes and pins every page on one thread; here the pages are faulted on every core and pinned
// in pieces on every core (starpu_memory_pin), so the cost is spread the same way as the
// generation that follows.
#pragma once

#include <cstddef>
#include <vector>

namespace starfact {

/// How host_matrix_alloc obtained a buffer; host_matrix_free needs the same value.
enum class PinMode {
    Pieces,  ///< malloc'd, faulted and pinned in pieces on every core (the default with GPUs)
    Whole,   ///< starpu_malloc: one cudaHostAlloc when CUDA workers exist
    None,    ///< malloc'd, not pinned (transfers are staged by the CUDA driver)
};

/// The mode host_matrix_alloc uses now: STARFACT_PIN=pieces|whole|none when set (anything else
/// throws ArgumentError naming STARFACT_PIN); otherwise Pieces when StarPU runs CUDA workers,
/// else Whole (which is then a plain allocation).
PinMode host_pin_mode();

/// `bytes` of host memory (uninitialised contents, at least 64-byte aligned) allocated as
/// host_pin_mode() says, which it stores in `mode`. In Pieces mode, piece k is the byte range
/// [piece_ends[k-1], piece_ends[k]) (increasing, the last one `bytes`), each pinned by its own
/// call: a CUDA copy must not cross from one to the next, so no transferred block may straddle
/// an end. Throws RuntimeError when the memory cannot be allocated or pinned (nothing is held
/// then), ArgumentError when piece_ends is not increasing or does not end at `bytes`. StarPU
/// must be initialised.
void* host_matrix_alloc(std::size_t bytes, const std::vector<std::size_t>& piece_ends, PinMode& mode);

/// Frees a buffer of host_matrix_alloc (same bytes, piece ends and mode); null does nothing.
void host_matrix_free(void* p, std::size_t bytes, const std::vector<std::size_t>& piece_ends, PinMode mode) noexcept;

/// The size the pieces aim at: large enough that the driver's cost per call does not count,
/// small enough that every core gets several.
constexpr std::size_t kPinPiece = std::size_t(256) << 20;

}  // namespace starfact
