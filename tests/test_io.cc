// The io layer: .npy and Matrix Market round trips (both orders, both dtypes, batches), files
// made by hand in NumPy's layouts read back into column-major, and every bad-file case giving a
// FileError that names the file and the fault, with no partial output left behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/io.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {
namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

void spit(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A .npy file as NumPy lays it out: magic, version 1.0, little-endian header length, the dict
/// padded with spaces to a multiple of 64 bytes and a newline, then `data`.
std::string npy_bytes(const std::string& dict, const std::string& data, int version = 1) {
    std::string header = dict;
    const std::size_t pre = version == 1 ? 10 : 12;
    while ((pre + header.size() + 1) % 64 != 0) header.push_back(' ');
    header.push_back('\n');
    std::string out("\x93NUMPY", 6);
    out.push_back(static_cast<char>(version));
    out.push_back('\0');
    const std::size_t len = header.size();
    out.push_back(static_cast<char>(len & 0xff));
    out.push_back(static_cast<char>((len >> 8) & 0xff));
    if (version != 1) {
        out.push_back('\0');
        out.push_back('\0');
    }
    return out + header + data;
}

template <class S>
std::string raw(const std::vector<S>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(S));
}

/// The FileError of `f()`, or a failure when it throws nothing or something else.
template <class F>
::testing::AssertionResult fails_with(F f, const std::string& path, const std::string& phrase) {
    try {
        f();
    } catch (const io::FileError& e) {
        if (e.argument() != path)
            return ::testing::AssertionFailure() << "names '" << e.argument() << "' instead of '" << path << "'";
        if (e.reason().find(phrase) == std::string::npos)
            return ::testing::AssertionFailure() << "message '" << e.what() << "' does not say '" << phrase << "'";
        if (std::string(e.what()).find(path) == std::string::npos)
            return ::testing::AssertionFailure() << "what() '" << e.what() << "' does not name the file";
        return ::testing::AssertionSuccess();
    } catch (const std::exception& e) {
        return ::testing::AssertionFailure() << "threw something else: " << e.what();
    }
    return ::testing::AssertionFailure() << "no exception";
}

template <class T>
class IoTyped : public SeededTest {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(IoTyped, Precisions);

TYPED_TEST(IoTyped, NpyRoundTripIsExactWithPaddedLeadingDimension) {
    using T = TypeParam;
    TempDir dir("starfact-io-");
    for (const auto& [m, n] : {std::pair{37, 23}, std::pair{1, 9}, std::pair{8, 1}, std::pair{0, 4}, std::pair{5, 0}}) {
        SCOPED_TRACE(::testing::Message() << m << " x " << n);
        const HostMatrix<T> A = random_matrix<T>(m, n, m + 3, this->seed() + m);
        const std::string path = dir.path() + "/a.npy";
        io::write_npy(path, m, n, A.ptr(), A.ld);
        const std::string bytes = slurp(path);
        const std::size_t hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
        EXPECT_EQ((10 + hlen) % 64, 0u) << "the data starts on a 64-byte boundary";
        EXPECT_NE(bytes.find("'fortran_order': True"), std::string::npos);
        EXPECT_NE(bytes.find(sizeof(T) == 4 ? "'<f4'" : "'<f8'"), std::string::npos);
        const io::Dense<T> B = io::read_npy<T>(path);
        EXPECT_EQ(B.ndim, 2);
        EXPECT_EQ(B.count, 1);
        ASSERT_EQ(B.m, m);
        ASSERT_EQ(B.n, n);
        EXPECT_EQ(B.dtype, sizeof(T) == 4 ? "<f4" : "<f8");
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) ASSERT_EQ(B.data[i + std::size_t(j) * m], A(i, j)) << i << "," << j;
        // The other precision reads it too (float -> double exactly).
        const io::Dense<double> D = io::read_npy<double>(path);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) ASSERT_EQ(D.data[i + std::size_t(j) * m], static_cast<double>(A(i, j)));
    }
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1)
        << "no temporary file is left beside the output";
}

TYPED_TEST(IoTyped, NpyBatchRoundTripKeepsEveryMatrix) {
    using T = TypeParam;
    TempDir dir("starfact-io-");
    const int count = 5, m = 7, n = 4;
    const HostMatrix<T> A = random_matrix<T>(m, n * count, m, this->seed());  // matrix b in columns b*n..
    const std::string path = dir.path() + "/batch.npy";
    io::write_npy_batch(path, count, m, n, A.ptr());
    const io::Dense<T> B = io::read_npy<T>(path);
    EXPECT_EQ(B.ndim, 3);
    ASSERT_EQ(B.count, count);
    ASSERT_EQ(B.m, m);
    ASSERT_EQ(B.n, n);
    for (int b = 0; b < count; ++b)
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) ASSERT_EQ(B.matrix(b)[i + j * m], A(i, b * n + j)) << b << ":" << i << "," << j;
}

TYPED_TEST(IoTyped, MatrixMarketRoundTripIsExact) {
    using T = TypeParam;
    TempDir dir("starfact-io-");
    const int m = 19, n = 11;
    HostMatrix<T> A = random_matrix<T>(m, n, m + 2, this->seed());
    A(0, 0) = T(1e-30);  // tiny and huge values keep every digit
    A(1, 0) = T(-3e30);
    const std::string path = dir.path() + "/a.mtx";
    io::write_dense(path, m, n, A.ptr(), A.ld);
    EXPECT_EQ(slurp(path).rfind("%%MatrixMarket matrix array real general\n", 0), 0u);
    const io::Dense<T> B = io::read_dense<T>(path);
    ASSERT_EQ(B.m, m);
    ASSERT_EQ(B.n, n);
    EXPECT_EQ(B.dtype, "real");
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) ASSERT_EQ(B.data[i + std::size_t(j) * m], A(i, j)) << i << "," << j;
}

class Io : public SeededTest {
protected:
    TempDir dir_{"starfact-io-"};
    std::string file(const std::string& name) const { return dir_.path() + "/" + name; }
};

TEST_F(Io, NpyCOrderTwoAndThreeDimensionsReadColumnMajor) {
    // C order (row-major) 2 x 3 float64: values 10*i + j.
    std::vector<double> c2;
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) c2.push_back(10.0 * i + j);
    spit(file("c2.npy"), npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", raw(c2)));
    const auto A = io::read_npy<double>(file("c2.npy"));
    ASSERT_EQ(A.m, 2);
    ASSERT_EQ(A.n, 3);
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 2; ++i) EXPECT_EQ(A.data[i + 2 * j], 10.0 * i + j);

    // C order 4 x 2 x 3 float32, version 2.0 header: values 100*b + 10*i + j.
    std::vector<float> c3;
    for (int b = 0; b < 4; ++b)
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 3; ++j) c3.push_back(100.0f * b + 10.0f * i + j);
    spit(file("c3.npy"), npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2, 3), }", raw(c3), 2));
    const auto B = io::read_npy<double>(file("c3.npy"));
    EXPECT_EQ(B.ndim, 3);
    ASSERT_EQ(B.count, 4);
    for (int b = 0; b < 4; ++b)
        for (int j = 0; j < 3; ++j)
            for (int i = 0; i < 2; ++i) EXPECT_EQ(B.matrix(b)[i + 2 * j], 100.0 * b + 10.0 * i + j);

    // Fortran order 4 x 2 x 3: the batch index varies fastest.
    std::vector<double> f3(24);
    for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 2; ++i)
            for (int b = 0; b < 4; ++b) f3[b + 4 * (i + 2 * j)] = 100.0 * b + 10.0 * i + j;
    spit(file("f3.npy"), npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (4, 2, 3), }", raw(f3)));
    const auto C = io::read_npy<float>(file("f3.npy"));
    for (int b = 0; b < 4; ++b)
        for (int j = 0; j < 3; ++j)
            for (int i = 0; i < 2; ++i) EXPECT_EQ(C.matrix(b)[i + 2 * j], 100.0f * b + 10.0f * i + j);

    // A 1-D array is a column, whatever its order.
    spit(file("v.npy"), npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (6,), }", raw(c2)));
    const auto V = io::read_npy<double>(file("v.npy"));
    EXPECT_EQ(V.ndim, 1);
    ASSERT_EQ(V.m, 6);
    ASSERT_EQ(V.n, 1);
    EXPECT_EQ(V.data, c2);
}

TEST_F(Io, MatrixMarketSymmetricAndIntegerFilesRead) {
    spit(file("s.mtx"), "%%MatrixMarket matrix array real symmetric\n% a comment\n\n3 3\n1\n2\n3\n4\n5\n6\n");
    const auto S = io::read_mtx<double>(file("s.mtx"));
    const std::vector<double> full = {1, 2, 3, 2, 4, 5, 3, 5, 6};
    EXPECT_EQ(S.data, full) << "the lower triangle column by column, mirrored";
    spit(file("i.mtx"), "%%matrixmarket MATRIX Array Integer General\n2 2\n1 -2\n3\n4\n");
    const auto I = io::read_mtx<float>(file("i.mtx"));
    EXPECT_EQ(I.data, (std::vector<float>{1, -2, 3, 4}));
    EXPECT_EQ(I.dtype, "integer");
}

TEST_F(Io, WritingReplacesAnExistingFileAndLeavesNoTemporary) {
    std::vector<double> a = {1, 2, 3, 4};
    spit(file("x.npy"), "old contents");
    io::write_dense(file("x.npy"), 2, 2, a.data(), 2);
    EXPECT_EQ(io::read_dense<double>(file("x.npy")).data, a);
    io::write_dense(file("x.mtx"), 2, 2, a.data(), 2);
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_.path())) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"x.mtx", "x.npy"}));
}

TEST_F(Io, UnwritableOutputsFailBeforeAnythingIsWritten) {
    std::vector<double> a = {1, 2, 3, 4};
    const std::string missing = file("no/such/dir/x.npy");
    EXPECT_TRUE(fails_with([&] { io::write_dense(missing, 2, 2, a.data(), 2); }, missing, "cannot create"));
    EXPECT_TRUE(fails_with([&] { io::check_writable(missing); }, missing, "does not exist"));
    EXPECT_TRUE(fails_with([&] { io::check_writable(dir_.path()); }, dir_.path(), "unknown file type"));
    fs::create_directory(file("d.npy"));
    EXPECT_TRUE(fails_with([&] { io::check_writable(file("d.npy")); }, file("d.npy"), "directory"));
    EXPECT_TRUE(fails_with([&] { io::check_writable(file("x.csv")); }, file("x.csv"), "unknown file type"));
    EXPECT_TRUE(fails_with([&] { io::write_dense(file("x.txt"), 2, 2, a.data(), 2); }, file("x.txt"),
                           "unknown file type"));
    EXPECT_NO_THROW(io::check_writable(file("ok.npy")));
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_.path())) names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"d.npy"}) << "check_writable leaves nothing behind";
    if (geteuid() != 0) {
        fs::create_directory(file("ro"));
        fs::permissions(file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
        EXPECT_TRUE(fails_with([&] { io::check_writable(file("ro/x.npy")); }, file("ro/x.npy"), "cannot create"));
        EXPECT_TRUE(fs::is_empty(file("ro")));
        fs::permissions(file("ro"), fs::perms::owner_all);
    }
}

struct BadFile {
    std::string name, bytes, phrase;
};

TEST_F(Io, EveryBadNpyFileIsAFileErrorNamingTheFault) {
    std::vector<double> six(6, 1.0);
    const std::string good = npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", raw(six));
    const std::size_t header = good.size() - 48;
    const std::vector<BadFile> cases = {
        {"empty.npy", "", "bad magic"},
        {"text.npy", "1 2 3\n4 5 6\n", "bad magic"},
        {"short-header.npy", good.substr(0, 8), "truncated header"},
        {"cut-header.npy", good.substr(0, 40), "truncated header"},
        {"version.npy", std::string("\x93NUMPY\x07\x00\x10\x00", 10) + std::string(16, ' '), "version"},
        {"int.npy", npy_bytes("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", std::string(24, '\0')),
         "unsupported dtype '<i4'"},
        {"big-endian.npy", npy_bytes("{'descr': '>f8', 'fortran_order': True, 'shape': (2, 3), }", raw(six)),
         "unsupported dtype '>f8'"},
        {"complex.npy", npy_bytes("{'descr': '<c16', 'fortran_order': True, 'shape': (2, 3), }", raw(six) + raw(six)),
         "unsupported dtype"},
        {"scalar.npy", npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (), }", raw(six).substr(0, 8)),
         "wrong dimensions"},
        {"four-d.npy", npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (1, 2, 3, 1), }", raw(six)),
         "wrong dimensions"},
        {"huge.npy", npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (70000, 70000), }", ""),
         "truncated data"},
        {"beyond-int.npy", npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (3000000000, 1), }", ""),
         "beyond 2^31-1"},
        {"beyond-memory.npy",
         npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2147483647, 46341, 46340), }", ""),
         "larger than any file"},
        {"no-shape.npy", npy_bytes("{'descr': '<f8', 'fortran_order': True, }", raw(six)), "needs the keys"},
        {"garbage-dict.npy", npy_bytes("descr <f8", raw(six)), "bad .npy header"},
        {"unknown-key.npy", npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), 'x': 1, }", raw(six)),
         "unknown key 'x'"},
        {"bad-bool.npy", npy_bytes("{'descr': '<f8', 'fortran_order': true, 'shape': (2, 3), }", raw(six)),
         "True or False"},
        {"mid-data.npy", good.substr(0, header + 20), "truncated data"},
        {"no-data.npy", good.substr(0, header), "truncated data"},
        {"trailing.npy", good + "xyz", "3 bytes after the data"},
    };
    ASSERT_NO_THROW(spit(file("good.npy"), good));
    EXPECT_EQ(io::read_npy<double>(file("good.npy")).data, six) << "the cases below are cut from a valid file";
    for (const BadFile& c : cases) {
        SCOPED_TRACE(c.name);
        spit(file(c.name), c.bytes);
        EXPECT_TRUE(fails_with([&] { io::read_npy<double>(file(c.name)); }, file(c.name), c.phrase));
        EXPECT_TRUE(fails_with([&] { io::read_dense<float>(file(c.name)); }, file(c.name), c.phrase));
    }
    EXPECT_TRUE(fails_with([&] { io::read_npy<double>(file("missing.npy")); }, file("missing.npy"), "cannot open"));
    EXPECT_TRUE(fails_with([&] { io::read_dense<double>(dir_.path()); }, dir_.path(), "unknown file type"));
    fs::create_directory(file("dir.npy"));
    EXPECT_TRUE(fails_with([&] { io::read_npy<double>(file("dir.npy")); }, file("dir.npy"), "is a directory"));
}

TEST_F(Io, EveryBadMatrixMarketFileIsAFileErrorNamingTheFault) {
    const std::vector<BadFile> cases = {
        {"empty.mtx", "", "bad magic"},
        {"plain.mtx", "2 2\n1\n2\n3\n4\n", "bad magic"},
        {"coordinate.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 5\n", "'coordinate' (sparse)"},
        {"complex.mtx", "%%MatrixMarket matrix array complex general\n1 1\n1 0\n", "field 'complex'"},
        {"pattern.mtx", "%%MatrixMarket matrix array pattern general\n1 1\n", "field 'pattern'"},
        {"hermitian.mtx", "%%MatrixMarket matrix array real hermitian\n1 1\n1\n", "symmetry 'hermitian'"},
        {"vector.mtx", "%%MatrixMarket vector array real general\n1 1\n1\n", "object 'vector'"},
        {"no-size.mtx", "%%MatrixMarket matrix array real general\n% only comments\n", "no size line"},
        {"bad-size.mtx", "%%MatrixMarket matrix array real general\n2 x\n1\n", "line 2: bad size line"},
        {"three-sizes.mtx", "%%MatrixMarket matrix array real general\n2 2 4\n1\n2\n3\n4\n", "bad size line"},
        {"negative.mtx", "%%MatrixMarket matrix array real general\n-2 2\n", "bad size line"},
        {"huge.mtx", "%%MatrixMarket matrix array real general\n70000 70000\n", "truncated data"},
        {"nonsquare-sym.mtx", "%%MatrixMarket matrix array real symmetric\n2 3\n1\n2\n3\n", "must be square"},
        {"mid-data.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3", "truncated data"},
        {"sym-short.mtx", "%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n", "needs 6 values"},
        {"word.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\nthree\n4\n", "line 5: 'three' is not"},
        {"extra.mtx", "%%MatrixMarket matrix array real general\n1 2\n1\n2\n3\n", "line 5: more values"},
    };
    for (const BadFile& c : cases) {
        SCOPED_TRACE(c.name);
        spit(file(c.name), c.bytes);
        EXPECT_TRUE(fails_with([&] { io::read_mtx<double>(file(c.name)); }, file(c.name), c.phrase));
        EXPECT_TRUE(fails_with([&] { io::read_dense<float>(file(c.name)); }, file(c.name), c.phrase));
    }
    EXPECT_TRUE(fails_with([&] { io::read_mtx<double>(file("missing.mtx")); }, file("missing.mtx"), "cannot open"));
}

TEST_F(Io, AFileTruncatedMidDataAtEveryLengthIsRefused) {
    // Every cut of a valid file, from an empty file to one byte short, is an error (never a
    // matrix with made-up values).
    std::vector<float> v(12);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(seed() % 1000) + k;
    const std::string good = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", raw(v));
    for (std::size_t len = 0; len < good.size(); ++len) {
        spit(file("cut.npy"), good.substr(0, len));
        EXPECT_THROW(io::read_npy<double>(file("cut.npy")), io::FileError) << "cut at " << len;
    }
    spit(file("cut.npy"), good);
    EXPECT_EQ(io::read_npy<float>(file("cut.npy")).data[1], v[4]) << "column-major entry 1 is (1, 0), v[4] in row-major order";
}

}  // namespace
}  // namespace starfact::test
