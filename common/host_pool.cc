// The pool of starpu_malloc'd host buffers (common/host_pool.hpp).
#include "common/host_pool.hpp"

#include <starpu.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/error.hpp"

namespace starfact::host_pool {
namespace {

struct Pool {
    std::mutex mutex;
    std::map<void*, std::size_t> sizes;  // every live buffer (kept or handed out) and its size
    std::deque<void*> kept;              // free buffers, oldest first
    std::size_t kept_bytes = 0;
};

Pool& pool() {
    static Pool p;
    return p;
}

std::size_t limit() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const std::size_t phys = pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                                                   : (std::size_t{1} << 33);
    return std::min(phys / 4, std::size_t{8} << 30);
}

/// Sizes rounded up to 2 MiB, so that calls of slightly different sizes share buffers.
std::size_t rounded(std::size_t bytes) {
    constexpr std::size_t kGrain = std::size_t{2} << 20;
    return (std::max<std::size_t>(bytes, 1) + kGrain - 1) / kGrain * kGrain;
}

}  // namespace

void* acquire(std::size_t bytes) {
    Pool& p = pool();
    const std::size_t size = rounded(bytes);
    {
        std::lock_guard<std::mutex> lock(p.mutex);
        // The smallest kept buffer that holds the request and is at most twice its rounded size
        // (so a small request takes a small buffer, never a large one it would waste).
        auto best = p.kept.end();
        for (auto it = p.kept.begin(); it != p.kept.end(); ++it) {
            const std::size_t s = p.sizes[*it];
            if (s >= bytes && s / 2 <= size && (best == p.kept.end() || s < p.sizes[*best])) best = it;
        }
        if (best != p.kept.end()) {
            void* b = *best;
            p.kept_bytes -= p.sizes[b];
            p.kept.erase(best);
            return b;
        }
    }
    void* b = nullptr;
    if (starpu_malloc_flags(&b, size, STARPU_MALLOC_PINNED) != 0 || b == nullptr)
        throw RuntimeError(fmt::format("cannot allocate {} bytes of host memory", size));
    std::lock_guard<std::mutex> lock(p.mutex);
    p.sizes[b] = size;
    return b;
}

void release(void* b) {
    if (b == nullptr) return;
    Pool& p = pool();
    std::deque<std::pair<void*, std::size_t>> drop;
    {
        std::lock_guard<std::mutex> lock(p.mutex);
        const auto it = p.sizes.find(b);
        if (it == p.sizes.end()) return;  // not ours
        const std::size_t cap = limit();
        if (it->second > cap) {
            drop.push_back(*it);
            p.sizes.erase(it);
        } else {
            p.kept.push_back(b);
            p.kept_bytes += it->second;
            while (p.kept_bytes > cap) {
                void* old = p.kept.front();
                p.kept.pop_front();
                const std::size_t s = p.sizes[old];
                p.kept_bytes -= s;
                p.sizes.erase(old);
                drop.emplace_back(old, s);
            }
        }
    }
    for (const auto& [q, s] : drop) starpu_free_flags(q, s, STARPU_MALLOC_PINNED);
}

void clear() {
    Pool& p = pool();
    std::deque<std::pair<void*, std::size_t>> drop;
    {
        std::lock_guard<std::mutex> lock(p.mutex);
        for (void* q : p.kept) {
            drop.emplace_back(q, p.sizes[q]);
            p.sizes.erase(q);
        }
        p.kept.clear();
        p.kept_bytes = 0;
    }
    for (const auto& [q, s] : drop) starpu_free_flags(q, s, STARPU_MALLOC_PINNED);
}

std::size_t kept_bytes() {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    return p.kept_bytes;
}

}  // namespace starfact::host_pool
