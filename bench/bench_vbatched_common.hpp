// Pieces shared by the variable-size batched benchmarks (bench_batched_v*.cc): their
// options and config record, the order distributions, the packed FP64 batch (host and device)
// and its padded copy, the CPU baseline's timing, the sampled residual, and the points' JSON
// records, table and summary.
#pragma once

#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "batched/cuda/kernels.hpp"
#include "bench/bench_common.hpp"
#include "common/matgen.hpp"
#include "common/parallel.hpp"

namespace starfact::bench::vbatched {

/// Orders uniform in [1, nmax], or skewed (the paper's: 1% nmax, the rest in [1, nmax/10]).
inline std::vector<int> draw_sizes(const std::string& dist, int nmax, int count, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<int> n(count);
    for (int b = 0; b < count; ++b)
        n[b] = dist == "skewed" ? (rng() % 100 == 0 ? nmax : 1 + static_cast<int>(rng() % std::max(1, nmax / 10)))
                                : 1 + static_cast<int>(rng() % nmax);
    return n;
}

template <class T>
T* device_alloc(std::size_t elements) {
    T* p = nullptr;
    check(cudaMalloc(&p, sizeof(T) * std::max<std::size_t>(elements, 1)), "cudaMalloc");
    return p;
}

template <class T>
void upload(T* d, const std::vector<T>& h) {
    check(cudaMemcpy(d, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
}

inline std::vector<int> download(const int* d, std::size_t count) {
    std::vector<int> h(count);
    check(cudaMemcpy(h.data(), d, sizeof(int) * count, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
}

inline int nonzero(const std::vector<int>& v) {
    return static_cast<int>(std::count_if(v.begin(), v.end(), [](int x) { return x != 0; }));
}

/// The options every variable-size benchmark takes.
struct Options {
    std::vector<int> nmaxes{32, 64, 128, 256, 512};
    std::vector<std::string> dists{"uniform", "skewed"};
    int count = 5000, reps = 5;
    bool cpu = true;
    std::string out_path;

    void add_to(CLI::App& app) {
        app.add_option("--nmax", nmaxes, "Largest orders")->check(CLI::PositiveNumber);
        app.add_option("--dist", dists, "Distributions: uniform, skewed")->check(CLI::IsMember({"uniform", "skewed"}));
        app.add_option("--count", count, "Matrices per batch")->check(CLI::PositiveNumber);
        app.add_option("--reps", reps, "Timed repetitions (median reported)")->check(CLI::PositiveNumber);
        app.add_flag_callback("--no-cpu", [this] { cpu = false; }, "Skip the CPU baseline");
        app.add_option("--json", out_path, "Also write the JSON lines to this file");
    }
};

/// The config record: the GPU, its SM count, the host's threads, the repetitions.
inline void emit_config(Emitter& emit, int reps) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    emit({{"record", "config"},
          {"device", prop.name},
          {"sms", prop.multiProcessorCount},
          {"cpu_threads", std::thread::hardware_concurrency()},
          {"reps", reps}});
}

/// The 16 source matrices of order nmax a batch's matrices are leading blocks of: uniform, or
/// (spd) SPD and strictly diagonally dominant, so that every leading block is SPD.
inline std::vector<std::vector<double>> sources(int nmax, bool spd) {
    std::vector<std::vector<double>> src(16, std::vector<double>(std::size_t(nmax) * nmax));
    for (int s = 0; s < 16; ++s) {
        if (!spd) {
            matgen::uniform(nmax, nmax, 77 + 13 * s + nmax, src[s].data(), nmax);
            continue;
        }
        matgen::spd(nmax, 77 + 13 * s + nmax, src[s].data(), nmax);
        for (int i = 0; i < nmax; ++i) src[s][i + std::size_t(i) * nmax] += nmax;
    }
    return src;
}

/// A batch of n[b] x n[b] FP64 matrices, lda max(1, n[b]), packed back to back: matrix b is the
/// leading block of src[b % src.size()] (order nmax). On the device: the original, the work copy
/// the timed runs overwrite, the pointers into the work copy, the orders, lda and infos.
struct PackedBatch {
    int count;
    std::vector<int> n, ld;
    std::vector<std::size_t> off;  ///< count + 1 offsets
    std::size_t total;
    std::vector<double> host;
    std::vector<double*> p;  ///< device pointers into the work copy
    double* d_orig;
    double* d_work;
    double** d_ptrs;
    int *d_n, *d_ld, *d_info;

    PackedBatch(std::vector<int> orders, const std::vector<std::vector<double>>& src, int nmax)
        : count(static_cast<int>(orders.size())), n(std::move(orders)), ld(count), off(count + 1, 0) {
        for (int b = 0; b < count; ++b) {
            ld[b] = std::max(1, n[b]);
            off[b + 1] = off[b] + static_cast<std::size_t>(ld[b]) * n[b];
        }
        total = off[count];
        host.resize(total);
        parallel_for(count, [&](int b) {
            const auto& S = src[b % src.size()];
            for (int j = 0; j < n[b]; ++j)
                std::copy(S.begin() + std::size_t(j) * nmax, S.begin() + std::size_t(j) * nmax + n[b],
                          host.begin() + off[b] + std::size_t(j) * ld[b]);
        });
        d_orig = device_alloc<double>(total);
        d_work = device_alloc<double>(total);
        upload(d_orig, host);
        p.resize(count);
        for (int b = 0; b < count; ++b) p[b] = d_work + off[b];
        d_ptrs = device_alloc<double*>(count);
        d_n = device_alloc<int>(count);
        d_ld = device_alloc<int>(count);
        d_info = device_alloc<int>(count);
        upload(d_ptrs, p);
        upload(d_n, n);
        upload(d_ld, ld);
    }
    ~PackedBatch() {
        cudaFree(d_ptrs);
        cudaFree(d_n);
        cudaFree(d_ld);
        cudaFree(d_info);
        cudaFree(d_work);
        cudaFree(d_orig);
    }
    PackedBatch(const PackedBatch&) = delete;
    PackedBatch& operator=(const PackedBatch&) = delete;

    /// The work copy back to the original (enqueued on the default stream).
    void restore() const {
        check(cudaMemcpyAsync(d_work, d_orig, sizeof(double) * total, cudaMemcpyDeviceToDevice, nullptr),
              "cudaMemcpyAsync");
    }
    /// The work copy on the host.
    std::vector<double> download_work() const {
        std::vector<double> f(total);
        check(cudaMemcpy(f.data(), d_work, sizeof(double) * total, cudaMemcpyDeviceToHost), "cudaMemcpy");
        return f;
    }
    /// Infos that are not 0.
    int failed() const { return nonzero(download(d_info, count)); }
    /// A largest matrix.
    int largest() const { return static_cast<int>(std::max_element(n.begin(), n.end()) - n.begin()); }
};

/// One device vector per matrix of order n[b], max(n[b], 1) elements each, back to back, and
/// its pointer array: the batch's tau, pivots or right-hand sides.
template <class T>
struct PerMatrix {
    std::vector<std::size_t> off;  ///< n.size() + 1 offsets
    T* d_data;
    T** d_ptrs;

    explicit PerMatrix(const std::vector<int>& n) : off(n.size() + 1, 0) {
        for (std::size_t b = 0; b < n.size(); ++b) off[b + 1] = off[b] + static_cast<std::size_t>(std::max(n[b], 1));
        d_data = device_alloc<T>(off.back());
        std::vector<T*> p(n.size());
        for (std::size_t b = 0; b < n.size(); ++b) p[b] = d_data + off[b];
        d_ptrs = device_alloc<T*>(n.size());
        upload(d_ptrs, p);
    }
    ~PerMatrix() {
        cudaFree(d_ptrs);
        cudaFree(d_data);
    }
    PerMatrix(const PerMatrix&) = delete;
    PerMatrix& operator=(const PerMatrix&) = delete;

    std::size_t total() const { return off.back(); }
};

/// count matrices of per elements each, one after the other on the device: the original, the
/// work copy and its strided pointer array (the fixed-size kernels' input); restore() copies
/// the original over the work copy.
struct StridedBatch {
    std::size_t per;
    int count;
    double* d_orig;
    double* d_work;
    double** d_ptrs;

    StridedBatch(std::size_t per_matrix, int matrices) : per(per_matrix), count(matrices) {
        d_orig = device_alloc<double>(per * count);
        d_work = device_alloc<double>(per * count);
        d_ptrs = device_alloc<double*>(count);
        batched::cuda::strided_pointers<double>(d_ptrs, d_work, static_cast<long long>(per), count, nullptr);
    }
    ~StridedBatch() {
        cudaFree(d_ptrs);
        cudaFree(d_work);
        cudaFree(d_orig);
    }
    StridedBatch(const StridedBatch&) = delete;
    StridedBatch& operator=(const StridedBatch&) = delete;

    void restore() const {
        check(cudaMemcpyAsync(d_work, d_orig, sizeof(double) * per * count, cudaMemcpyDeviceToDevice, nullptr),
              "cudaMemcpyAsync");
    }
};

/// The batch padded to nmax x nmax matrices (identity below and right of each).
struct PaddedBatch : StridedBatch {
    PaddedBatch(const PackedBatch& b, int nmax) : StridedBatch(std::size_t(nmax) * nmax, b.count) {
        std::vector<double> eye(per, 0.0);
        for (int i = 0; i < nmax; ++i) eye[i + std::size_t(i) * nmax] = 1.0;
        upload(d_orig, eye);
        for (int k = 1; k < count; ++k)
            check(cudaMemcpyAsync(d_orig + per * k, d_orig, sizeof(double) * per, cudaMemcpyDeviceToDevice, nullptr),
                  "cudaMemcpyAsync");
        for (int k = 0; k < count; ++k)
            if (b.n[k] > 0)
                check(cudaMemcpy2DAsync(d_orig + per * k, sizeof(double) * nmax, b.d_orig + b.off[k],
                                        sizeof(double) * b.ld[k], sizeof(double) * b.n[k], b.n[k],
                                        cudaMemcpyDeviceToDevice, nullptr),
                      "cudaMemcpy2DAsync");
    }
};

/// The "same count" yardstick: as many matrices as the batch, all of one order n_eq =
/// round(cbrt(mean of n^3)) (the same count and, up to the rounding, the same flops), each the
/// leading n_eq x n_eq block of a source matrix (SPD sources give SPD blocks).
struct SameOrderBatch : StridedBatch {
    int order;

    SameOrderBatch(const std::vector<int>& n, const std::vector<std::vector<double>>& src, int nmax)
        : StridedBatch(std::size_t(equal_order(n)) * equal_order(n), static_cast<int>(n.size())),
          order(equal_order(n)) {
        std::vector<double> h(per * count);
        parallel_for(count, [&](int b) {
            const auto& S = src[b % src.size()];
            for (int j = 0; j < order; ++j)
                std::copy(S.begin() + std::size_t(j) * nmax, S.begin() + std::size_t(j) * nmax + order,
                          h.begin() + per * b + std::size_t(j) * order);
        });
        upload(d_orig, h);
    }

    static int equal_order(const std::vector<int>& n) {
        double n3 = 0;
        for (int x : n) n3 += double(x) * x * x;
        return std::max(1, static_cast<int>(std::lround(std::cbrt(n3 / std::max<std::size_t>(n.size(), 1)))));
    }
};

/// Median seconds of the host path `run` over max(1, reps / 2) runs after a warm-up, the batch's
/// input copied back into `work` (untimed) before each.
template <class Run>
double time_on_host(int reps, const PackedBatch& b, std::vector<double>& work, Run run) {
    std::vector<double> ts;
    for (int r = 0; r < std::max(1, reps / 2) + 1; ++r) {
        parallel_for(b.count, [&](int k) {
            std::copy(b.host.begin() + b.off[k], b.host.begin() + b.off[k + 1], work.begin() + b.off[k]);
        });
        const auto t0 = std::chrono::steady_clock::now();
        run();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) ts.push_back(s);
    }
    return median(ts);
}

/// The largest of residual(b) over a largest matrix and 64 others spread over the batch (NaN if
/// any is NaN).
template <class Residual>
double sampled_residual(const PackedBatch& b, Residual residual) {
    std::vector<int> pick{b.largest()};
    for (int k = 0; k < 64 && k < b.count; ++k) pick.push_back(static_cast<int>((k * 7919LL) % b.count));
    std::vector<double> r(pick.size());
    parallel_for(static_cast<int>(pick.size()), [&](int k) { r[k] = residual(pick[k]); });
    return *std::max_element(r.begin(), r.end(),
                             [](double a, double c) { return std::isnan(c) ? false : (std::isnan(a) || a < c); });
}

/// The timed points of one batch: each emitted as a JSON "point" record when taken; those of the
/// benchmark's operation kept for its table and summary.
class Points {
public:
    Points(Emitter& emit, std::string op, int nmax, std::string dist, int count)
        : emit_(emit), op_(std::move(op)), nmax_(nmax), dist_(std::move(dist)), count_(count) {}

    /// impl's time t for op (rate: useful flops over t), with the extra fields.
    void record(const std::string& op, const std::string& impl, double t, double useful,
                nlohmann::ordered_json extra = nlohmann::ordered_json::object()) {
        nlohmann::ordered_json j{{"record", "point"}, {"op", op},     {"nmax", nmax_}, {"dist", dist_},
                                 {"count", count_},   {"impl", impl}, {"seconds", t},  {"gflops", useful / t / 1e9}};
        for (auto& [k, v] : extra.items()) j[k] = v;
        emit_(j);
        if (op == op_) pts_.push_back({impl, t});
    }

    /// The time of impl (0 when not timed).
    double time(const std::string& impl) const {
        for (const auto& pt : pts_)
            if (pt.impl == impl) return pt.t;
        return 0;
    }

    /// Prints the table: a line per point with its time over DSSE's; with rates, also the rate of
    /// the batch's useful flops (0 for the fixed_* yardsticks, which factor other matrices).
    /// Returns the fastest alternative (neither starfact_* nor fixed_*) and its time.
    std::pair<std::string, double> print_table(double flops, bool rates) const {
        const double t_dsse = time("starfact_dsse");
        std::string best_name;
        double best_other = 0;
        fmt::print("# {} nmax {} count {} ({:.3f} GFLOP useful):\n", dist_, nmax_, count_, flops / 1e9);
        for (const auto& pt : pts_) {
            const bool fixed = pt.impl.rfind("fixed_", 0) == 0;
            if (rates)
                fmt::print("#   {:20s} {:10.3f} ms {:9.1f} GFLOP/s  time / dsse {:6.2f}\n", pt.impl, pt.t * 1e3,
                           fixed ? 0.0 : flops / pt.t / 1e9, pt.t / t_dsse);
            else
                fmt::print("#   {:20s} {:10.3f} ms  time / dsse {:6.2f}\n", pt.impl, pt.t * 1e3, pt.t / t_dsse);
            if (pt.impl.rfind("starfact_", 0) != 0 && !fixed && (best_other == 0 || pt.t < best_other)) {
                best_other = pt.t;
                best_name = pt.impl;
            }
        }
        return {best_name, best_other};
    }

    /// The summary record: the fastest alternative and its time over DSSE's, each fixed-size
    /// yardstick timed (fixed_equal_flops, fixed_same_count) over DSSE's time (above 0.8 the
    /// variable-size batch reaches the fixed-size throughput within 20%: docs/batched.md,
    /// "Variable sizes"), and the extra fields.
    void emit_summary(const std::pair<std::string, double>& best,
                      nlohmann::ordered_json extra = nlohmann::ordered_json::object()) {
        nlohmann::ordered_json j{{"record", "summary"},
                                 {"op", op_},
                                 {"nmax", nmax_},
                                 {"dist", dist_},
                                 {"count", count_},
                                 {"best_alternative", best.first},
                                 {"best_alternative_over_dsse", best.second / time("starfact_dsse")}};
        std::string line =
            fmt::format("#   best other / dsse {:.2f} ({})", best.second / time("starfact_dsse"), best.first);
        for (const char* y : {"fixed_equal_flops", "fixed_same_count"})
            if (time(y) > 0) {
                j[std::string(y + 6) + "_over_dsse"] = time(y) / time("starfact_dsse");
                line += fmt::format(", {} / dsse {:.2f}", y + 6, time(y) / time("starfact_dsse"));
            }
        fmt::print("{} (the variable-size target: >= 0.8 with uniform sizes)\n", line);
        for (auto& [k, v] : extra.items()) j[k] = v;
        emit_(j);
    }

private:
    struct Point {
        std::string impl;
        double t;
    };
    Emitter& emit_;
    std::string op_;
    int nmax_;
    std::string dist_;
    int count_;
    std::vector<Point> pts_;
};

}  // namespace starfact::bench::vbatched
