// solve_from_file A B [X]: reads the n x n matrix A and the right-hand sides B (.npy or Matrix
// Market .mtx), solves A X = B with starfact's tile LU, prints the backward error
// ||B - A X||_inf / ((||A||_inf ||X||_inf + ||B||_inf) n eps) and writes X when asked.
// Exit code: 0 solved and accurate, 1 singular or inaccurate, 2 bad input.
#include <starfact/starfact.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

namespace {

// The infinity norm (largest row sum of magnitudes) of a column-major m x n matrix.
double norm_inf(int m, int n, const double* a, int lda) {
    std::vector<double> rows(static_cast<std::size_t>(m), 0.0);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) rows[i] += std::abs(a[i + static_cast<std::size_t>(j) * lda]);
    return m > 0 ? *std::max_element(rows.begin(), rows.end()) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3 || argc > 4) {
        std::fprintf(stderr, "usage: %s A.npy|A.mtx B.npy|B.mtx [X.npy|X.mtx]\n", argv[0]);
        return 2;
    }
    try {
        const auto A = starfact::io::read_dense<double>(argv[1]);
        const auto B = starfact::io::read_dense<double>(argv[2]);
        if (A.ndim != 2 || A.m != A.n) throw starfact::ArgumentError(argv[1], "A must be a square matrix");
        if (B.ndim == 3 || B.m != A.n) throw starfact::ArgumentError(argv[2], "B must have as many rows as A");
        const int n = A.n, nrhs = B.n, ld = std::max(1, n), nb = 256;
        if (argc == 4) starfact::io::check_writable(argv[3]);  // refuse a bad output before solving

        std::vector<double> X(static_cast<std::size_t>(ld) * nrhs);
        int info = 0;
        {
            starfact::Runtime runtime;  // declared first: destroyed after the matrices
            starfact::TileMatrix<double> tA(n, n, nb), tB(n, nrhs, nb);
            tA.from_lapack(A.data.data(), ld);
            tB.from_lapack(B.data.data(), ld);
            info = starfact::gesv(tA, tB, /*ib=*/32);
            tB.to_lapack(X.data(), ld);
        }
        if (info > 0) {
            std::printf("A is singular: U(%d,%d) is exactly zero\n", info, info);
            return 1;
        }
        // R = B - A X, column by column.
        std::vector<double> R(B.data.begin(), B.data.end());
        for (int c = 0; c < nrhs; ++c)
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < n; ++i)
                    R[i + static_cast<std::size_t>(c) * ld] -= A.data[i + static_cast<std::size_t>(j) * ld] *
                                                               X[j + static_cast<std::size_t>(c) * ld];
        const double den = (norm_inf(n, n, A.data.data(), ld) * norm_inf(n, nrhs, X.data(), ld) +
                            norm_inf(n, nrhs, B.data.data(), ld)) * n * std::numeric_limits<double>::epsilon();
        const double berr = den > 0 ? norm_inf(n, nrhs, R.data(), ld) / den : 0.0;
        std::printf("n = %d, nrhs = %d, backward error = %.3g (pass below 30)\n", n, nrhs, berr);
        if (argc == 4) starfact::io::write_dense(argv[3], n, nrhs, X.data(), ld);
        return berr < 30 ? 0 : 1;
    } catch (const starfact::ArgumentError& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
