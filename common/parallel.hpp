// parallel_for: runs body(i) for i in [0, n) on every core with plain threads. Host-side data
// preparation only (generators, layout conversion); StarPU schedules the numerical work.
#pragma once

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace starfact {

/// Calls body(i) for every i in [0, n), spread over up to `threads` threads (0: all cores),
/// dynamically balanced. body must be safe to call concurrently for distinct i.
template <class F>
void parallel_for(int n, F body, unsigned threads = 0) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
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

}  // namespace starfact
