// parallel_for: runs body(i) for i in [0, n) on every core with plain threads. Host-side data
// preparation only (generators, layout conversion, checks); StarPU schedules the numerical work.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace starfact {

/// The threads host-side loops use when asked for 0: every core.
inline unsigned all_cores() { return std::max(1u, std::thread::hardware_concurrency()); }

/// Calls body(i) for every i in [0, n), spread over up to `threads` threads (0: all cores),
/// dynamically balanced. body must be safe to call concurrently for distinct i.
template <class F>
void parallel_for(int n, F body, unsigned threads = 0) {
    if (threads == 0) threads = all_cores();
    threads = std::min<unsigned>(threads, static_cast<unsigned>(std::max(n, 0)));
    if (threads <= 1) {
        for (int i = 0; i < n; ++i) body(i);
        return;
    }
    std::atomic<int> next{0};
    auto worker = [&] {
        for (int i = next++; i < n; i = next++) body(i);
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
}

/// parallel_for over a 64-bit count (pieces of work beyond 2^31 - 1).
template <class F>
void parallel_for64(std::int64_t n, F body, unsigned threads = 0) {
    if (threads == 0) threads = all_cores();
    threads = static_cast<unsigned>(std::min<std::int64_t>(threads, std::max<std::int64_t>(n, 0)));
    if (threads <= 1) {
        for (std::int64_t i = 0; i < n; ++i) body(i);
        return;
    }
    std::atomic<std::int64_t> next{0};
    auto worker = [&] {
        for (std::int64_t i = next++; i < n; i = next++) body(i);
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
}

/// Calls body(begin, end) on consecutive pieces of [0, n) of `grain` indices (the last one
/// shorter), spread over every core: for loops over many cheap indices (element copies),
/// where one atomic per index would cost more than the work.
template <class F>
void parallel_ranges(std::int64_t n, std::int64_t grain, F body, unsigned threads = 0) {
    if (n <= 0) return;
    grain = std::max<std::int64_t>(grain, 1);
    const std::int64_t pieces = (n + grain - 1) / grain;
    parallel_for64(
        pieces, [&](std::int64_t p) { body(p * grain, std::min(n, (p + 1) * grain)); }, threads);
}

/// Calls body(t, threads) once for each t in [0, threads) on its own thread (0: all cores),
/// for loops that partition their work statically and keep per-thread partial results.
template <class F>
void parallel_team(F body, unsigned threads = 0) {
    if (threads == 0) threads = all_cores();
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back([&body, t, threads] { body(t, threads); });
    body(0u, threads);
    for (auto& th : pool) th.join();
}

}  // namespace starfact
