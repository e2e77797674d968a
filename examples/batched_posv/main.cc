// batched_posv [S.npy [B.npy]]: Cholesky factorizations and solves of many small SPD matrices
// at once with starfact's batched host API. Without arguments the batch (1000 matrices of order
// 24, one right-hand side each) is generated in memory; with S.npy (count x n x n, or one n x n
// matrix) and B.npy (count x n x nrhs; default: ones) it is read from NumPy files. Prints every
// failing matrix and the largest backward error ||b - A x||_inf / ((||A||_inf ||x||_inf +
// ||b||_inf) n eps) over the batch. Exit code: 0 all solved and accurate, 1 otherwise, 2 bad input.
#include <starfact/starfact.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

namespace {

// The infinity norm of a column-major m x n matrix.
double norm_inf(int m, int n, const double* a, int lda) {
    std::vector<double> rows(static_cast<std::size_t>(m), 0.0);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) rows[i] += std::abs(a[i + static_cast<std::size_t>(j) * lda]);
    return m > 0 ? *std::max_element(rows.begin(), rows.end()) : 0.0;
}

// count random SPD matrices G G^T + n I of order n, one after the other (leading dimension n).
std::vector<double> random_spd(int count, int n, unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> S(static_cast<std::size_t>(count) * n * n), G(static_cast<std::size_t>(n) * n);
    for (int b = 0; b < count; ++b) {
        for (double& g : G) g = u(rng);
        double* s = S.data() + static_cast<std::size_t>(b) * n * n;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) {
                double sum = i == j ? n : 0.0;
                for (int k = 0; k < n; ++k) sum += G[i + k * n] * G[j + k * n];
                s[i + j * n] = sum;
            }
    }
    return S;
}

}  // namespace

int main(int argc, char** argv) {
    namespace bt = starfact::batched;
    if (argc > 3) {
        std::fprintf(stderr, "usage: %s [S.npy [B.npy]]\n", argv[0]);
        return 2;
    }
    try {
        int count = 1000, n = 24, nrhs = 1;
        std::vector<double> S, B;
        if (argc >= 2) {
            auto s = starfact::io::read_dense<double>(argv[1]);  // 3-D: a batch; 2-D: one matrix
            if (s.ndim == 1 || s.m != s.n) throw starfact::ArgumentError(argv[1], "expected square matrices");
            count = s.count;
            n = s.n;
            S = std::move(s.data);
        } else {
            S = random_spd(count, n, 2026);
        }
        if (argc == 3) {
            auto b = starfact::io::read_dense<double>(argv[2]);
            if (b.count != count || b.m != n)
                throw starfact::ArgumentError(argv[2], "expected one n x nrhs block per matrix of S");
            nrhs = b.n;
            B = std::move(b.data);
        } else {
            B.assign(static_cast<std::size_t>(count) * n * nrhs, 1.0);
        }
        const int ld = std::max(1, n);
        const long long strideA = static_cast<long long>(ld) * n, strideB = static_cast<long long>(ld) * nrhs;

        // Factor (lower triangle) and solve, every matrix on its own, spread over the cores.
        std::vector<double> F = S, X = B;
        std::vector<int> info(static_cast<std::size_t>(count));
        const int failed = bt::potrf(bt::Uplo::lower, n, F.data(), ld, strideA, info.data(), count);
        for (const bt::Failure& f : bt::failures(info.data(), count))
            std::printf("matrix %d: the leading minor of order %d is not positive\n", f.index, f.info);
        bt::potrs(bt::Uplo::lower, n, nrhs, F.data(), ld, strideA, X.data(), ld, strideB, count);

        // The backward error of every solved matrix, column by column; the largest is printed.
        double worst = 0.0;
        for (int b = 0; b < count; ++b) {
            if (info[b] != 0) continue;
            const double* a = S.data() + b * strideA;
            for (int c = 0; c < nrhs; ++c) {
                const double* x = X.data() + b * strideB + static_cast<long long>(c) * ld;
                const double* rhs = B.data() + b * strideB + static_cast<long long>(c) * ld;
                std::vector<double> r(rhs, rhs + n);
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < n; ++i) r[i] -= a[i + static_cast<long long>(j) * ld] * x[j];
                const double den = (norm_inf(n, n, a, ld) * norm_inf(n, 1, x, ld) + norm_inf(n, 1, rhs, ld)) * n *
                                   std::numeric_limits<double>::epsilon();
                const double berr = den > 0 ? norm_inf(n, 1, r.data(), ld) / den : 0.0;
                worst = std::isnan(berr) ? berr : std::max(worst, berr);
            }
        }
        std::printf("%d matrices of order %d, %d right-hand side(s): %d failed, largest backward error %.3g (pass "
                    "below 30)\n",
                    count, n, nrhs, failed, worst);
        return failed == 0 && worst < 30 ? 0 : 1;
    } catch (const starfact::ArgumentError& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
