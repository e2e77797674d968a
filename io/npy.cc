// NumPy .npy files (format versions 1.0, 2.0, 3.0): header parsing, reading into column-major
// matrices, writing Fortran-order arrays.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "io/io.hpp"

namespace starfact::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

struct NpyHeader {
    std::string descr;
    bool fortran = false;
    std::vector<long long> shape;
    std::size_t data_offset = 0;
};

/// A cursor over the header's dict literal, e.g. "{'descr': '<f8', 'fortran_order': False,
/// 'shape': (3, 4), }"; every failure names what was expected.
class DictParser {
public:
    DictParser(const std::string& path, const std::string& text) : path_(path), s_(text) {}

    NpyHeader parse() {
        NpyHeader h;
        bool descr = false, order = false, shape = false;
        expect('{');
        while (true) {
            skip_space();
            if (peek() == '}') break;
            const std::string key = quoted();
            skip_space();
            expect(':');
            skip_space();
            if (key == "descr") {
                h.descr = quoted();
                descr = true;
            } else if (key == "fortran_order") {
                h.fortran = boolean();
                order = true;
            } else if (key == "shape") {
                h.shape = tuple();
                shape = true;
            } else {
                fail(fmt::format("unknown key '{}'", key));
            }
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            skip_space();
            if (peek() != '}') fail("expected ',' or '}'");
        }
        if (!descr || !order || !shape) fail("it needs the keys 'descr', 'fortran_order' and 'shape'");
        return h;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw FileError(path_, fmt::format("bad .npy header ({} at character {} of \"{}\")", what, pos_, s_));
    }
    char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
    void skip_space() {
        while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    void expect(char c) {
        skip_space();
        if (peek() != c) fail(fmt::format("expected '{}'", c));
        ++pos_;
    }
    std::string quoted() {
        const char q = peek();
        if (q != '\'' && q != '"') fail("expected a quoted string");
        const std::size_t end = s_.find(q, pos_ + 1);
        if (end == std::string::npos) fail("unterminated string");
        std::string out = s_.substr(pos_ + 1, end - pos_ - 1);
        pos_ = end + 1;
        return out;
    }
    bool boolean() {
        if (s_.compare(pos_, 4, "True") == 0) {
            pos_ += 4;
            return true;
        }
        if (s_.compare(pos_, 5, "False") == 0) {
            pos_ += 5;
            return false;
        }
        fail("expected True or False");
    }
    std::vector<long long> tuple() {
        std::vector<long long> dims;
        expect('(');
        while (true) {
            skip_space();
            if (peek() == ')') break;
            if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a dimension");
            long long d = 0;
            while (std::isdigit(static_cast<unsigned char>(peek()))) {
                // read_npy refuses a dimension beyond 2^31-1 with the shape; here it must not wrap.
                if (d > (LLONG_MAX - 9) / 10) fail("a dimension beyond 2^63");
                d = d * 10 + (s_[pos_++] - '0');
            }
            // Python's long suffix, written by old NumPy versions.
            if (peek() == 'L') ++pos_;
            dims.push_back(d);
            skip_space();
            if (peek() == ',') ++pos_;
            else if (peek() != ')') fail("expected ',' or ')'");
        }
        ++pos_;
        return dims;
    }

    const std::string& path_;
    const std::string& s_;
    std::size_t pos_ = 0;
};

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_for_reading(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw FileError(path, "is a directory, not a file");
    File f(std::fopen(path.c_str(), "rb"));
    if (!f) throw FileError(path, fmt::format("cannot open: {}", std::strerror(errno)));
    return f;
}

NpyHeader read_header(const std::string& path, std::FILE* f) {
    unsigned char pre[12] = {};
    const std::size_t got = std::fread(pre, 1, 10, f);
    if (got < kMagicLen || std::memcmp(pre, kMagic, kMagicLen) != 0)
        throw FileError(path, "bad magic: not a NumPy .npy file (it must start with \\x93NUMPY)");
    if (got < 10) throw FileError(path, "truncated header");
    const int major = pre[6];
    std::size_t len = 0, offset = 0;
    if (major == 1) {
        len = pre[8] | (std::size_t(pre[9]) << 8);
        offset = 10;
    } else if (major == 2 || major == 3) {
        if (std::fread(pre + 10, 1, 2, f) != 2) throw FileError(path, "truncated header");
        len = pre[8] | (std::size_t(pre[9]) << 8) | (std::size_t(pre[10]) << 16) | (std::size_t(pre[11]) << 24);
        offset = 12;
    } else {
        throw FileError(path, fmt::format("unsupported .npy format version {}.{}", major, int(pre[7])));
    }
    std::string text(len, '\0');
    if (std::fread(text.data(), 1, len, f) != len) throw FileError(path, "truncated header");
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) text.pop_back();
    NpyHeader h = DictParser(path, text).parse();
    h.data_offset = offset + len;
    return h;
}

std::string shape_string(const std::vector<long long>& shape) {
    std::string s = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
}

template <class T>
constexpr const char* descr_of() {
    return sizeof(T) == 4 ? "<f4" : "<f8";
}

/// Reads the file's elements (of type S) in order, a block at a time: converting them to T and
/// reordering them into column-major matrices then needs no second copy of the array.
template <class S>
class ElementReader {
public:
    ElementReader(const std::string& path, std::FILE* f, const NpyHeader& h, std::size_t total)
        : path_(path), f_(f), h_(h), total_(total) {}

    /// The next `count` elements, converted to T, into `dst` (straight from the file when S is T).
    template <class T>
    void read(T* dst, std::size_t count) {
        if constexpr (std::is_same_v<S, T>) {
            fill(dst, count);
        } else {
            buf_.resize(std::max(buf_.size(), count));
            fill(buf_.data(), count);
            for (std::size_t k = 0; k < count; ++k) dst[k] = static_cast<T>(buf_[k]);
        }
    }
    /// The next `count` elements, in the reader's own buffer (valid until the next call).
    const S* block(std::size_t count) {
        buf_.resize(std::max(buf_.size(), count));
        fill(buf_.data(), count);
        return buf_.data();
    }
    /// One element at a time, for the orders that scatter every element.
    S next() {
        if (pos_ == have_) {
            have_ = std::min(kBlock, total_ - done_);
            block(have_);
            pos_ = 0;
        }
        return buf_[pos_++];
    }

    static constexpr std::size_t kBlock = std::size_t(1) << 20;

private:
    void fill(S* dst, std::size_t count) {
        const std::size_t got = std::fread(dst, sizeof(S), count, f_);
        done_ += got;
        if (got != count)
            throw FileError(path_, fmt::format("truncated data: shape {} needs {} values, the file holds {}",
                                               shape_string(h_.shape), total_, done_));
    }

    const std::string& path_;
    std::FILE* f_;
    const NpyHeader& h_;
    std::size_t total_, done_ = 0;
    std::vector<S> buf_;
    std::size_t pos_ = 0, have_ = 0;
};

/// Reads the file's data (elements of type S in the file's order) into out's column-major
/// matrices, a block at a time.
template <class T, class S>
void read_data(const std::string& path, std::FILE* f, const NpyHeader& h, int ndim, Dense<T>& out) {
    const std::size_t c = out.count, m = out.m, n = out.n, mn = m * n;
    if (c * mn == 0) return;
    ElementReader<S> in(path, f, h, c * mn);
    T* dst = out.data.data();
    constexpr std::size_t kBlock = ElementReader<S>::kBlock;
    if (ndim == 1 || (ndim == 2 && h.fortran)) {
        // Already column-major.
        for (std::size_t k = 0; k < mn; k += kBlock) in.read(dst + k, std::min(kBlock, mn - k));
    } else if (!h.fortran) {
        // C order: each matrix row by row; a block of rows is written column by column.
        const std::size_t rows = std::max<std::size_t>(1, kBlock / n);
        for (std::size_t b = 0; b < c; ++b) {
            T* d = dst + b * mn;
            for (std::size_t i0 = 0; i0 < m; i0 += rows) {
                const std::size_t r = std::min(rows, m - i0);
                const S* src = in.block(r * n);
                for (std::size_t j = 0; j < n; ++j)
                    for (std::size_t i = 0; i < r; ++i) d[i0 + i + j * m] = static_cast<T>(src[i * n + j]);
            }
        }
    } else {
        // Shape (c, m, n) in Fortran order: the batch index varies fastest.
        for (std::size_t j = 0; j < n; ++j)
            for (std::size_t i = 0; i < m; ++i)
                for (std::size_t b = 0; b < c; ++b) dst[b * mn + i + j * m] = static_cast<T>(in.next());
    }
}

/// Writes a version 1.0 .npy file of T's dtype and `shape` in Fortran order; `data(out)` appends
/// the elements, in that order, to the AtomicFile `out`.
template <class T, class Data>
void write_array(const std::string& path, const std::vector<long long>& shape, Data data) {
    // The magic, length and header together take a multiple of 64 bytes and the header ends
    // with a newline, as NumPy writes them.
    std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': True, 'shape': {}, }}", descr_of<T>(),
                                   shape_string(shape));
    const std::size_t unpadded = kMagicLen + 4 + dict.size() + 1;
    dict.append((64 - unpadded % 64) % 64, ' ');
    dict.push_back('\n');
    if (dict.size() > 65535) throw FileError(path, "the .npy header is too long");
    std::string pre(kMagic, kMagicLen);
    pre.push_back('\x01');
    pre.push_back('\x00');
    pre.push_back(static_cast<char>(dict.size() & 0xff));
    pre.push_back(static_cast<char>(dict.size() >> 8));
    detail::AtomicFile out(path);
    out.write(pre + dict);
    data(out);
    out.commit();
}

void require_dims(const std::string& path, int m, int n, const char* what) {
    if (m < 0 || n < 0) throw FileError(path, fmt::format("negative {} dimensions {} x {}", what, m, n));
}

}  // namespace

template <class T>
Dense<T> read_npy(const std::string& path) {
    File f = open_for_reading(path);
    const NpyHeader h = read_header(path, f.get());
    if (h.descr != "<f4" && h.descr != "<f8")
        throw FileError(path, fmt::format("unsupported dtype '{}' (starfact reads '<f4' and '<f8': little-endian "
                                          "float32 and float64)", h.descr));
    const int ndim = static_cast<int>(h.shape.size());
    if (ndim < 1 || ndim > 3)
        throw FileError(path, fmt::format("wrong dimensions: shape {} has {} dimensions; starfact reads 1-D (a vector), "
                                          "2-D (a matrix) and 3-D (a batch of matrices) arrays",
                                          shape_string(h.shape), ndim));
    Dense<T> out;
    out.ndim = ndim;
    out.dtype = h.descr;
    // Orders and batch counts are ints (LAPACK's, and every per-matrix kernel's); element counts
    // are 64-bit, so a (50000, 50000) matrix is read.
    for (const long long d : h.shape)
        if (d > INT_MAX)
            throw FileError(path, fmt::format("wrong dimensions: shape {} has a dimension beyond 2^31-1 (matrix orders "
                                              "and batch counts are 32-bit ints)",
                                              shape_string(h.shape)));
    out.count = ndim == 3 ? static_cast<int>(h.shape[0]) : 1;
    out.m = static_cast<int>(h.shape[ndim == 3 ? 1 : 0]);
    out.n = ndim == 1 ? 1 : static_cast<int>(h.shape[ndim - 1]);
    const std::size_t item = h.descr == "<f4" ? 4 : 8;
    const std::size_t per_matrix = static_cast<std::size_t>(out.m) * out.n;
    if (per_matrix > 0 && static_cast<std::size_t>(out.count) > (SIZE_MAX / item) / per_matrix)
        throw FileError(path, fmt::format("wrong dimensions: shape {} is larger than any file", shape_string(h.shape)));
    const std::size_t elems = static_cast<std::size_t>(out.count) * out.m * out.n;
    // The file must hold exactly the header's data: fewer bytes is truncation, more means the
    // shape does not describe the file.
    struct stat st {};
    if (fstat(fileno(f.get()), &st) != 0) throw FileError(path, fmt::format("cannot stat: {}", std::strerror(errno)));
    const std::size_t have = static_cast<std::size_t>(st.st_size) > h.data_offset ? st.st_size - h.data_offset : 0;
    if (have < elems * item)
        throw FileError(path, fmt::format("truncated data: shape {} of '{}' needs {} bytes after the header, the file "
                                          "holds {}", shape_string(h.shape), h.descr, elems * item, have));
    if (have > elems * item)
        throw FileError(path, fmt::format("{} bytes after the data of shape {} of '{}' (the header does not "
                                          "describe the file)", have - elems * item, shape_string(h.shape), h.descr));
    detail::require_memory(path, elems * sizeof(T), fmt::format("shape {}", shape_string(h.shape)));
    out.data.resize(elems);
    if (item == 4)
        read_data<T, float>(path, f.get(), h, ndim, out);
    else
        read_data<T, double>(path, f.get(), h, ndim, out);
    return out;
}

template <class T>
void write_npy(const std::string& path, int m, int n, const T* A, int lda) {
    require_dims(path, m, n, "matrix");
    if (lda < std::max(1, m)) throw FileError(path, fmt::format("lda = {} < max(1, m = {})", lda, m));
    const std::size_t mm = m, nn = n;
    write_array<T>(path, {m, n}, [&](detail::AtomicFile& out) {
        if (lda == m) {
            out.write(A, mm * nn * sizeof(T));
            return;
        }
        // Column by column: no packed copy of a matrix that may fill most of the memory.
        for (std::size_t j = 0; j < nn; ++j) out.write(A + j * static_cast<std::size_t>(lda), mm * sizeof(T));
    });
}

template <class T>
void write_npy_batch(const std::string& path, int count, int m, int n, const T* A) {
    require_dims(path, m, n, "matrix");
    if (count < 0) throw FileError(path, fmt::format("negative batch count {}", count));
    const std::size_t c = count, mm = m, nn = n;
    write_array<T>(path, {count, m, n}, [&](detail::AtomicFile& out) {
        // Fortran order of shape (count, m, n): the batch index varies fastest, gathered a block
        // at a time.
        const std::size_t chunk = std::size_t(1) << 20;
        std::vector<T> block;
        block.reserve(std::min(c * mm * nn, chunk));
        for (std::size_t j = 0; j < nn; ++j)
            for (std::size_t i = 0; i < mm; ++i)
                for (std::size_t b = 0; b < c; ++b) {
                    block.push_back(A[b * mm * nn + i + j * mm]);
                    if (block.size() == chunk) {
                        out.write(block.data(), block.size() * sizeof(T));
                        block.clear();
                    }
                }
        out.write(block.data(), block.size() * sizeof(T));
    });
}

template Dense<float> read_npy<float>(const std::string&);
template Dense<double> read_npy<double>(const std::string&);
template void write_npy<float>(const std::string&, int, int, const float*, int);
template void write_npy<double>(const std::string&, int, int, const double*, int);
template void write_npy_batch<float>(const std::string&, int, int, int, const float*);
template void write_npy_batch<double>(const std::string&, int, int, int, const double*);

}  // namespace starfact::io
