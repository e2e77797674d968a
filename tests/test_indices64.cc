// 64-bit element counts and offsets, checked without allocating 2^31 entries: the tile layout of
// matrices of 50000 and 100000 (against an independent formula), the .npy and Matrix Market
// readers on headers that promise more than 2^31 elements (a clean FileError, never a wrap-around
// or an allocation), the streaming reader and writers across their block boundaries, the
// drivers' size check (no 2^31 refusal left, host memory and one tile still refused), batched
// offsets beyond 2^31, and one tile's 32-bit limit in TileMatrix.
#include <gtest/gtest.h>
#include <starpu.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "batched/batched.hpp"
#include "drivers/session.hpp"
#include "io/io.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_matrix.hpp"

namespace starfact::test {
namespace {

constexpr std::uint64_t kInt32 = static_cast<std::uint64_t>(INT_MAX);

double host_memory_bytes() {
    return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
}

// ---- TileMatrix's layout ----------------------------------------------------------------------

/// Tile k's extent along a dimension of `size`, from the tile count alone (no int arithmetic).
std::uint64_t extent(std::uint64_t size, std::uint64_t nb, std::uint64_t k) {
    const std::uint64_t tiles = (size + nb - 1) / nb;
    return k + 1 < tiles ? nb : size - (tiles - 1) * nb;
}

struct Layout {
    int m, n, nb;
};

// Walks the tiles in storage order (tile column after tile column, tile after tile inside one)
// and checks that each starts where the previous one ended, that the closed form
// j nb m + i nb tn(j) agrees, and that the last one ends at exactly m * n, beyond 2^31.
TEST(Indices64, TileOffsetsOfLargeLayoutsAreContiguousAndEndAtMTimesN) {
    const std::vector<Layout> layouts = {
        {50000, 50000, 256}, {50000, 50000, 1000}, {100000, 100000, 1024}, {100000, 99999, 1000},
        {65536, 65536, 2048}, {4194304, 1024, 2048}, {70001, 60013, 4096},
    };
    for (const Layout& L : layouts) {
        SCOPED_TRACE(testing::Message() << L.m << " x " << L.n << ", nb " << L.nb);
        const std::uint64_t m = L.m, n = L.n, nb = L.nb;
        const std::uint64_t mt = (m + nb - 1) / nb, nt = (n + nb - 1) / nb;
        ASSERT_GT(m * n, kInt32) << "the layout must need 64-bit offsets";
        std::uint64_t expected = 0, rows = 0, cols = 0;
        for (std::uint64_t j = 0; j < nt; ++j) {
            const std::uint64_t tn = extent(n, nb, j);
            ASSERT_EQ(static_cast<std::uint64_t>(TileMatrix<double>::tile_extent(L.n, L.nb, static_cast<int>(j))), tn);
            cols += tn;
            for (std::uint64_t i = 0; i < mt; ++i) {
                const std::uint64_t tm = extent(m, nb, i);
                if (j == 0) {
                    ASSERT_EQ(static_cast<std::uint64_t>(TileMatrix<double>::tile_extent(L.m, L.nb, static_cast<int>(i))),
                              tm);
                    rows += tm;
                }
                const std::uint64_t off =
                    TileMatrix<double>::tile_offset(L.m, L.n, L.nb, static_cast<int>(i), static_cast<int>(j));
                ASSERT_EQ(off, expected) << "tile (" << i << ", " << j << ")";
                ASSERT_EQ(off, j * nb * m + i * nb * tn) << "tile (" << i << ", " << j << ")";
                ASSERT_EQ(TileMatrix<float>::tile_offset(L.m, L.n, L.nb, static_cast<int>(i), static_cast<int>(j)), off);
                expected += tm * tn;
            }
        }
        EXPECT_EQ(rows, m);
        EXPECT_EQ(cols, n);
        EXPECT_EQ(expected, m * n) << "the last tile's offset plus its size";
        const std::uint64_t last = TileMatrix<double>::tile_offset(L.m, L.n, L.nb, static_cast<int>(mt - 1),
                                                                   static_cast<int>(nt - 1));
        EXPECT_EQ(last + extent(m, nb, mt - 1) * extent(n, nb, nt - 1), m * n);
        EXPECT_GT(last, kInt32);
    }
}

TEST(Indices64, LargestTileIsFormedIn64Bits) {
    EXPECT_EQ(TileMatrix<double>::max_tile_elements(100000, 100000, 1024), 1024LL * 1024);
    EXPECT_EQ(TileMatrix<double>::max_tile_elements(65536, 65536, 65536), 1LL << 32);
    EXPECT_EQ(TileMatrix<double>::max_tile_elements(131072, 1024, 1 << 20), 131072LL * 1024);
    EXPECT_EQ(TileMatrix<double>::max_tile_elements(INT_MAX, INT_MAX, INT_MAX),
              static_cast<long long>(INT_MAX) * INT_MAX);
}

// A tile of more than 2^31-1 elements is an ArgumentError naming nb, found before the runtime
// is looked at; the largest tile that fits passes the check and then fails only for want of a
// Runtime (none runs in this test: nothing is allocated either way).
TEST(Indices64, TileMatrixRefusesATileBeyond32BitsAndNamesNb) {
    ASSERT_FALSE(Runtime::active());
    try {
        TileMatrix<double> A(65536, 65536, 65536);
        FAIL() << "a 65536 x 65536 tile was accepted";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "nb");
        EXPECT_NE(std::string(e.what()).find("4294967296 elements"), std::string::npos) << e.what();
    }
    try {
        TileMatrix<float>::wrap(nullptr, 100000, 50000, 50000);
        FAIL() << "a 50000 x 50000 tile was accepted";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "nb");
    }
    // 46340^2 < 2^31 - 1 < 46341^2.
    EXPECT_THROW(TileMatrix<double>(46341, 46341, 46341), ArgumentError);
    EXPECT_THROW(TileMatrix<double>(46340, 46340, 46340), RuntimeError);
    EXPECT_THROW(TileMatrix<double>(100000, 100000, 1024), RuntimeError);
}

// The instance uses the same layout: every tile's handle points at storage + tile_offset, with
// the tile's own shape (a small matrix with edge tiles, as wrap() lays it out).
class TileMatrixLayout : public RuntimeTest {};

TEST_F(TileMatrixLayout, HandlesPointAtTileOffsets) {
    const int m = 1000, n = 700, nb = 256;
    std::vector<double> storage(static_cast<std::size_t>(m) * n, 0.0);
    {
        TileMatrix<double> A = TileMatrix<double>::wrap(storage.data(), m, n, nb);
        ASSERT_EQ(A.mt(), 4);
        ASSERT_EQ(A.nt(), 3);
        for (int j = 0; j < A.nt(); ++j)
            for (int i = 0; i < A.mt(); ++i) {
                starpu_data_handle_t h = A(i, j);
                EXPECT_EQ(reinterpret_cast<double*>(starpu_matrix_get_local_ptr(h)),
                          storage.data() + TileMatrix<double>::tile_offset(m, n, nb, i, j));
                EXPECT_EQ(static_cast<int>(starpu_matrix_get_nx(h)), A.tile_m(i));
                EXPECT_EQ(static_cast<int>(starpu_matrix_get_ny(h)), A.tile_n(j));
                EXPECT_EQ(A.tile_m(i), static_cast<int>(extent(m, nb, i)));
                EXPECT_EQ(A.tile_n(j), static_cast<int>(extent(n, nb, j)));
            }
    }
}

// ---- the readers on headers beyond 2^31 elements -----------------------------------------------

std::string npy_bytes(const std::string& dict, const std::string& data) {
    std::string header = dict;
    while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
    header.push_back('\n');
    std::string out("\x93NUMPY\x01\x00", 8);
    out.push_back(static_cast<char>(header.size() & 0xff));
    out.push_back(static_cast<char>(header.size() >> 8));
    return out + header + data;
}

void spit(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// The reason of the FileError that f() throws; a test failure for anything else.
template <class F>
std::string file_error(F f) {
    try {
        f();
    } catch (const io::FileError& e) {
        return e.reason();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "not a FileError: " << e.what();
        return "";
    }
    ADD_FAILURE() << "no error";
    return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class Indices64Files : public ::testing::Test {
protected:
    std::string file(const std::string& name) const { return dir_.path() + "/" + name; }
    TempDir dir_;
};

// A header of shape (50000, 50000) is parsed (the shape and the 2.5e9 elements it implies are
// reported exactly), then the data, far shorter than the 2e10 bytes it needs, is truncation: a
// FileError, before anything the size of the matrix is allocated.
TEST_F(Indices64Files, NpyHeaderOf50000Squared) {
    const std::vector<double> some(16, 1.0);
    const std::string data(reinterpret_cast<const char*>(some.data()), some.size() * sizeof(double));
    for (const bool fortran : {true, false}) {
        SCOPED_TRACE(fortran ? "Fortran order" : "C order");
        const std::string path = file(fortran ? "f.npy" : "c.npy");
        spit(path, npy_bytes(std::string("{'descr': '<f8', 'fortran_order': ") + (fortran ? "True" : "False") +
                                 ", 'shape': (50000, 50000), }",
                             data));
        for (const std::string& why : {file_error([&] { io::read_npy<double>(path); }),
                                       file_error([&] { io::read_dense<float>(path); })}) {
            EXPECT_TRUE(contains(why, "truncated data")) << why;
            EXPECT_TRUE(contains(why, "(50000, 50000)")) << why;
            EXPECT_TRUE(contains(why, "needs 20000000000 bytes")) << why;
            EXPECT_TRUE(contains(why, "holds 128")) << why;
        }
    }
    // float32, and a batch of three 40000 x 20000 matrices (2.4e9 elements, each under 2^31).
    spit(file("f4.npy"), npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (50000, 50000), }", data));
    EXPECT_TRUE(contains(file_error([&] { io::read_npy<double>(file("f4.npy")); }), "needs 10000000000 bytes"));
    spit(file("batch.npy"), npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 40000, 20000), }", data));
    EXPECT_TRUE(contains(file_error([&] { io::read_npy<double>(file("batch.npy")); }), "needs 19200000000 bytes"));
    // A vector of 3e9 entries: an order beyond an int, refused with the shape.
    spit(file("long.npy"), npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (3000000000,), }", data));
    const std::string why = file_error([&] { io::read_npy<double>(file("long.npy")); });
    EXPECT_TRUE(contains(why, "beyond 2^31-1") && contains(why, "(3000000000,)")) << why;
    // Digits that would wrap a 64-bit counter.
    spit(file("wrap.npy"),
         npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (99999999999999999999999, 1), }", data));
    EXPECT_TRUE(contains(file_error([&] { io::read_npy<double>(file("wrap.npy")); }), "bad .npy header"));
}

// A file whose data is all there (a sparse file: no disk used) but that cannot be held in this
// machine's memory is refused by the reader before it allocates: 64-bit sizes end to end.
TEST_F(Indices64Files, NpyBeyondHostMemoryIsAFileErrorNotAnAllocation) {
    const int order = 200000;  // 3.2e11 bytes as float64
    const double bytes = static_cast<double>(order) * order * 8;
    if (bytes <= host_memory_bytes()) GTEST_SKIP() << "this machine holds a 200000 x 200000 float64 matrix";
    const std::string header = npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (200000, 200000), }", "");
    spit(file("big.npy"), header);
    if (truncate(file("big.npy").c_str(), static_cast<off_t>(header.size() + static_cast<std::size_t>(bytes))) != 0)
        GTEST_SKIP() << "this file system does not take a sparse file of 320 GB";
    const std::string why = file_error([&] { io::read_npy<double>(file("big.npy")); });
    EXPECT_TRUE(contains(why, "(200000, 200000)") && contains(why, "GiB of memory")) << why;
}

TEST_F(Indices64Files, MtxSizeLineBeyond2To31Elements) {
    spit(file("big.mtx"), "%%MatrixMarket matrix array real general\n50000 50000\n1\n2\n3\n");
    std::string why = file_error([&] { io::read_mtx<double>(file("big.mtx")); });
    EXPECT_TRUE(contains(why, "truncated data") && contains(why, "needs 2500000000 values")) << why;
    spit(file("sym.mtx"), "%%MatrixMarket matrix array real symmetric\n70000 70000\n1\n");
    why = file_error([&] { io::read_mtx<double>(file("sym.mtx")); });
    EXPECT_TRUE(contains(why, "needs 2450035000 values")) << why;
    spit(file("long.mtx"), "%%MatrixMarket matrix array real general\n3000000000 1\n1\n");
    why = file_error([&] { io::read_mtx<double>(file("long.mtx")); });
    EXPECT_TRUE(contains(why, "beyond 2^31-1")) << why;
}

// ---- the streaming reader and writers, across their blocks of 2^20 elements --------------------

double value(std::size_t b, std::size_t i, std::size_t j) { return static_cast<double>(b * 1000003 + i * 1009 + j); }

// Hand-made files in C order (rows of the matrix one after the other, several blocks of rows) and
// as float32 in Fortran order (converted a block at a time) read back exactly.
TEST_F(Indices64Files, ReaderAcrossBlocks) {
    const std::size_t m = 400000, n = 3;  // 1.2e6 elements: blocks of 349525 rows
    std::vector<double> c_order(m * n);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) c_order[i * n + j] = value(0, i, j);
    spit(file("c.npy"), npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (400000, 3), }",
                                  std::string(reinterpret_cast<const char*>(c_order.data()), c_order.size() * 8)));
    const io::Dense<double> c = io::read_npy<double>(file("c.npy"));
    ASSERT_EQ(c.m, static_cast<int>(m));
    ASSERT_EQ(c.n, static_cast<int>(n));
    std::size_t wrong = 0;
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t i = 0; i < m; ++i) wrong += c.data[i + j * m] != value(0, i, j);
    EXPECT_EQ(wrong, 0u);

    std::vector<float> f_order(m * n);
    for (std::size_t k = 0; k < m * n; ++k) f_order[k] = static_cast<float>(k % 16777216);
    spit(file("f.npy"), npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (400000, 3), }",
                                  std::string(reinterpret_cast<const char*>(f_order.data()), f_order.size() * 4)));
    const io::Dense<double> f = io::read_npy<double>(file("f.npy"));
    wrong = 0;
    for (std::size_t k = 0; k < m * n; ++k) wrong += f.data[k] != static_cast<double>(k % 16777216);
    EXPECT_EQ(wrong, 0u);
}

// write_npy_batch gathers Fortran order a block at a time and write_npy writes a padded matrix
// column by column; the reader (batch index fastest, element by element) gives both back.
TEST_F(Indices64Files, WritersAcrossBlocks) {
    const int count = 3, m = 700, n = 600;  // 1.26e6 elements
    const std::size_t cc = count, mm = m, nn = n;
    std::vector<double> batch(cc * mm * nn);
    for (std::size_t b = 0; b < cc; ++b)
        for (std::size_t j = 0; j < nn; ++j)
            for (std::size_t i = 0; i < mm; ++i) batch[b * mm * nn + i + j * mm] = value(b, i, j);
    io::write_npy_batch(file("batch.npy"), count, m, n, batch.data());
    const io::Dense<double> back = io::read_npy<double>(file("batch.npy"));
    ASSERT_EQ(back.ndim, 3);
    ASSERT_EQ(back.count, count);
    ASSERT_EQ(back.m, m);
    ASSERT_EQ(back.n, n);
    EXPECT_TRUE(back.data == batch);
    EXPECT_EQ(back.matrix(2)[5 + 7 * m], value(2, 5, 7));

    const int lda = m + 5;
    std::vector<double> padded(static_cast<std::size_t>(lda) * nn, -1.0);
    for (std::size_t j = 0; j < nn; ++j)
        for (std::size_t i = 0; i < mm; ++i) padded[i + j * lda] = value(1, i, j);
    io::write_npy(file("padded.npy"), m, n, padded.data(), lda);
    const io::Dense<double> p = io::read_npy<double>(file("padded.npy"));
    ASSERT_EQ(p.m, m);
    ASSERT_EQ(p.n, n);
    std::size_t wrong = 0;
    for (std::size_t j = 0; j < nn; ++j)
        for (std::size_t i = 0; i < mm; ++i) wrong += p.data[i + j * mm] != value(1, i, j);
    EXPECT_EQ(wrong, 0u);
}

// io::Dense's matrix b of a batch whose offsets pass 2^31 (address arithmetic only).
TEST(Indices64, DenseMatrixOffsetIs64Bit) {
    io::Dense<double> d;
    d.count = 4;
    d.m = 50000;
    d.n = 20000;
    d.data.resize(1);
    const auto base = reinterpret_cast<std::uintptr_t>(d.data.data());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(d.matrix(3)) - base, 3ull * 50000 * 20000 * sizeof(double));
}

// ---- the drivers' size check -------------------------------------------------------------------

TEST(Indices64, ProblemSizeCheckAccepts50000SquaredWhenMemoryAllows) {
    // 2.5e9 one-byte elements: beyond 2^31, within the memory of any machine that runs the tests.
    if (host_memory_bytes() < 2.5e9) GTEST_SKIP() << "less than 2.5 GB of host memory";
    EXPECT_NO_THROW(cli::check_problem_size("-n", 50000, 50000, 1, 1));
    EXPECT_NO_THROW(cli::check_problem_size("-n", 46341, 46341, 1, 1));
    EXPECT_NO_THROW(cli::check_problem_size("-n", 50000, 50000, 1, 1, 1024));
    EXPECT_NO_THROW(cli::check_problem_size("-n", 50000, 50000, 1, 1, 46340));
}

TEST(Indices64, ProblemSizeCheckRefusesOnHostMemoryNamingTheOption) {
    const int copies = static_cast<int>(host_memory_bytes() / (50000.0 * 50000 * 8)) + 1;
    for (const char* option : {"-n", "--nrhs", "--orders"}) {
        try {
            cli::check_problem_size(option, 50000, 50000, 8, copies);
            ADD_FAILURE() << "accepted " << copies << " copies of a 50000 x 50000 float64 matrix";
        } catch (const ArgumentError& e) {
            EXPECT_EQ(e.argument(), option);
            const std::string what = e.what();
            EXPECT_TRUE(contains(what, "50000 x 50000") && contains(what, "GiB of host memory")) << what;
            EXPECT_FALSE(contains(what, "32-bit")) << what;
        }
    }
}

TEST(Indices64, ProblemSizeCheckRefusesAnOrderOrATileBeyondAnInt) {
    try {
        cli::check_problem_size("-m", 3000000000L, 1, 8, 0);
        ADD_FAILURE() << "an order of 3e9 was accepted";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "-m");
        EXPECT_TRUE(contains(e.what(), "beyond 2^31-1")) << e.what();
    }
    try {
        // copies = 0: only the tile is in question.
        cli::check_problem_size("-n", 65536, 65536, 8, 0, 65536);
        ADD_FAILURE() << "a 65536 x 65536 tile was accepted";
    } catch (const ArgumentError& e) {
        EXPECT_EQ(e.argument(), "--nb");
        EXPECT_TRUE(contains(e.what(), "4294967296 elements")) << e.what();
    }
    // A tall matrix in one tile column: the tile is min(nb, m) x min(nb, n).
    EXPECT_NO_THROW(cli::check_problem_size("-n", 131072, 1024, 8, 0, 1 << 20));
    EXPECT_THROW(cli::check_problem_size("-n", 3000000, 1024, 8, 0, 1 << 22), ArgumentError);
}

// ---- batched offsets -----------------------------------------------------------------------------

TEST(Indices64, BatchOffsetsPass2To31) {
    // Three million 32 x 32 matrices: matrix 2999999 starts beyond 2^31 elements.
    EXPECT_EQ(batched::batch_offset(2999999, 32 * 32), 3071998976LL);
    EXPECT_GT(batched::batch_offset(2999999, 32 * 32), static_cast<long long>(INT_MAX));
    EXPECT_EQ(batched::batch_offset(INT_MAX, INT_MAX), static_cast<long long>(INT_MAX) * INT_MAX);
    EXPECT_EQ(batched::batch_offset(70000, 40000), 2800000000LL);
    // Pivots of a batch of 10^8 matrices of order 32 (stride n).
    EXPECT_EQ(batched::batch_offset(99999999, 32), 3199999968LL);
    static_assert(batched::batch_offset(65536, 65536) == 4294967296LL, "formed in 64 bits");

    // The pointer of matrix b, from its address alone: nothing is read or written.
    const std::uintptr_t base = std::uintptr_t{1} << 40;
    double* A = reinterpret_cast<double*>(base);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(batched::batch_matrix(A, 32 * 32, 2999999)) - base,
              3071998976ull * sizeof(double));
    const int* ipiv = reinterpret_cast<const int*>(base);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(batched::batch_matrix(ipiv, 32, 99999999)) - base,
              3199999968ull * sizeof(int));
}

}  // namespace
}  // namespace starfact::test
