// The batched module's argument checks, failure lists and flop counts, shared by its paths.
#include <fmt/format.h>

#include <algorithm>

#include "batched/batched.hpp"
#include "batched/detail.hpp"
#include "common/error.hpp"

namespace starfact::batched {

std::vector<Failure> failures(const int* info, int count) {
    require(count >= 0, "count", fmt::format("must be >= 0, got {}", count));
    require(count == 0 || info != nullptr, "info", "is null with count > 0");
    std::vector<Failure> out;
    for (int b = 0; b < count; ++b)
        if (info[b] != 0) out.push_back({b, info[b]});
    return out;
}

// LAPACK's counts (LAWN 41, multiplications plus additions), as the benchmarks use them.
double getrf_flops(int n) {
    const double d = n;
    return 2.0 / 3.0 * d * d * d - 0.5 * d * d + 5.0 / 6.0 * d;
}
double potrf_flops(int n) {
    const double d = n;
    return d * d * d / 3.0 + 0.5 * d * d + d / 6.0;
}
double geqrf_flops(int m, int n) {
    const double dm = m, dn = n;
    return 2.0 * dm * dn * dn - 2.0 / 3.0 * dn * dn * dn + dm * dn + dn * dn + 14.0 / 3.0 * dn;
}
double getrs_flops(int n, int nrhs) { return nrhs * (2.0 * n * static_cast<double>(n) - n); }
double potrs_flops(int n, int nrhs) { return nrhs * 2.0 * n * static_cast<double>(n); }
double gels_flops(int m, int n, int nrhs) {
    // geqrf, Q^T B (ormqr: 4 m n - 2 n^2 + 3 n per column), the triangular solve (n^2 per column).
    const double dm = m, dn = n;
    return geqrf_flops(m, n) + nrhs * (4.0 * dm * dn - dn * dn + 3.0 * dn);
}

namespace detail {

const char* op_name(Op op) {
    switch (op) {
        case Op::getrf:
            return "getrf";
        case Op::getrs:
            return "getrs";
        case Op::potrf:
            return "potrf";
        case Op::potrs:
            return "potrs";
        case Op::geqrf:
            return "geqrf";
        case Op::gels:
            return "gels";
    }
    return "?";
}

char uplo_char(Uplo uplo) { return uplo == Uplo::upper ? 'U' : 'L'; }

namespace {
bool has_rhs(Op op) { return op == Op::getrs || op == Op::potrs || op == Op::gels; }
bool is_qr(Op op) { return op == Op::geqrf || op == Op::gels; }
}  // namespace

void check(const Problem& p) {
    const bool qr = is_qr(p.op), rhs = has_rhs(p.op);
    const int rows = qr ? p.m : p.n;
    if (qr) require(p.m >= 0, "m", fmt::format("must be >= 0, got {}", p.m));
    require(p.n >= 0, "n", fmt::format("must be >= 0, got {}", p.n));
    if (qr)
        require(
            p.m >= p.n, "m",
            fmt::format("must be >= n = {} ({} of a wide matrix is not supported), got {}", p.n, op_name(p.op), p.m));
    if (rhs) require(p.nrhs >= 0, "nrhs", fmt::format("must be >= 0, got {}", p.nrhs));
    require(p.count >= 0, "count", fmt::format("must be >= 0, got {}", p.count));
    require(p.lda >= std::max(1, rows), "lda",
            fmt::format("must be >= max(1, {}) = {}, got {}", qr ? "m" : "n", std::max(1, rows), p.lda));
    const long long sizeA = static_cast<long long>(p.lda) * p.n;
    if (p.strided && p.count > 1)
        require(p.strideA >= sizeA, "strideA",
                fmt::format("must be >= lda * n = {} (matrices may not overlap), got {}", sizeA, p.strideA));
    if (rhs) {
        require(p.ldb >= std::max(1, rows), "ldb",
                fmt::format("must be >= max(1, {}) = {}, got {}", qr ? "m" : "n", std::max(1, rows), p.ldb));
        const long long sizeB = static_cast<long long>(p.ldb) * p.nrhs;
        if (p.strided && p.count > 1)
            require(p.strideB >= sizeB, "strideB",
                    fmt::format("must be >= ldb * nrhs = {} (matrices may not overlap), got {}", sizeB, p.strideB));
    }
    const bool work = p.count > 0 && p.n > 0;
    require(!work || p.A != nullptr, "A", "is null with count > 0 and n > 0");
    if (p.op == Op::getrf || p.op == Op::getrs)
        require(!work || p.ipiv != nullptr, "ipiv", "is null with count > 0 and n > 0");
    if (qr) require(!work || p.tau != nullptr, "tau", "is null with count > 0 and n > 0");
    if (rhs) require(!work || p.nrhs == 0 || p.B != nullptr, "B", "is null with count > 0, n > 0 and nrhs > 0");
    if (p.op == Op::getrf || p.op == Op::potrf || p.op == Op::gels)
        require(p.count == 0 || p.info != nullptr, "info", "is null with count > 0");
}

void check_host_pointers(const void* const* array, int count, const char* name) {
    for (int b = 0; b < count; ++b)
        require(array[b] != nullptr, name, fmt::format("entry {} of the pointer batch is null", b));
}

bool nothing_to_do(const Problem& p) { return p.count == 0 || p.n == 0 || (has_rhs(p.op) && p.nrhs == 0); }

void zero_info(int* info, int count) {
    if (info != nullptr) std::fill(info, info + count, 0);
}

}  // namespace detail
}  // namespace starfact::batched
