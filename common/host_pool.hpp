// Host buffers from starpu_malloc (pinned when CUDA workers exist, so StarPU's transfers are
// asynchronous), kept after use and handed out again: pinning a large buffer costs about as much
// as copying it several times, and the batched tasks API packs every call into such buffers.
// The pool is emptied when the Runtime stops (before StarPU does). Not installed.
#pragma once

#include <cstddef>

namespace starfact::host_pool {

/// A buffer of at least `bytes` bytes (>= 1): a kept one when one is large enough and at most
/// twice the request rounded up to 2 MiB, else a new one of that rounded size. Throws
/// RuntimeError when the allocation fails.
void* acquire(std::size_t bytes);

/// Gives back a buffer from acquire (`p` null: nothing). It is kept for later calls while the
/// kept buffers stay under the pool's limit (a quarter of the physical memory, at most 8 GiB;
/// the oldest are freed first), else freed.
void release(void* p);

/// Frees every kept buffer (Runtime's destructor calls it while StarPU still runs).
void clear();

/// Bytes kept now (for tests).
std::size_t kept_bytes();

/// An acquired buffer, given back on destruction.
class Buffer {
public:
    explicit Buffer(std::size_t bytes) : p_(acquire(bytes)) {}
    ~Buffer() { release(p_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    template <class E>
    E* as() const {
        return static_cast<E*>(p_);
    }

private:
    void* p_;
};

}  // namespace starfact::host_pool
