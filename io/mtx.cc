// Matrix Market array files (dense): reading general and symmetric real or integer matrices,
// writing general real ones.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "io/atomic_file.hpp"
#include "io/io.hpp"

namespace starfact::io {
namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

/// Walks the text line by line and token by token, counting lines for error messages.
class Scanner {
public:
    Scanner(const std::string& path, const std::string& text) : path_(path), s_(text) {}

    /// The next non-empty line that is not a comment ('%'), or false at the end.
    bool next_content_line(std::string& line) {
        while (pos_ < s_.size()) {
            const std::size_t end = std::min(s_.find('\n', pos_), s_.size());
            line = s_.substr(pos_, end - pos_);
            pos_ = end + 1;
            ++line_no_;
            const std::size_t first = line.find_first_not_of(" \t\r");
            if (first != std::string::npos && line[first] != '%') return true;
        }
        return false;
    }

    /// The next number; false at the end of the text. A token that is not a number throws.
    bool next_value(double& v) {
        while (pos_ < s_.size()) {
            const char c = s_[pos_];
            if (c == '\n') {
                ++line_no_;
                ++pos_;
            } else if (c == '%') {
                pos_ = std::min(s_.find('\n', pos_), s_.size());
            } else if (std::isspace(static_cast<unsigned char>(c))) {
                ++pos_;
            } else {
                break;
            }
        }
        if (pos_ >= s_.size()) return false;
        std::size_t end = pos_;
        while (end < s_.size() && !std::isspace(static_cast<unsigned char>(s_[end]))) ++end;
        const std::string token = s_.substr(pos_, end - pos_);
        char* stop = nullptr;
        errno = 0;
        v = std::strtod(token.c_str(), &stop);
        if (stop != token.c_str() + token.size())
            throw FileError(path_, fmt::format("line {}: '{}' is not a number", line_no_ + 1, token));
        pos_ = end;
        return true;
    }

    long long line() const { return line_no_; }
    /// Bytes not scanned yet.
    std::size_t remaining() const { return pos_ < s_.size() ? s_.size() - pos_ : 0; }

private:
    const std::string& path_;
    const std::string& s_;
    std::size_t pos_ = 0;
    long long line_no_ = 0;  ///< lines consumed so far (an array file has a line per value)
};

std::string read_text(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw FileError(path, "is a directory, not a file");
    std::ifstream f(path, std::ios::binary);
    if (!f) throw FileError(path, fmt::format("cannot open: {}", std::strerror(errno)));
    std::ostringstream s;
    s << f.rdbuf();
    if (f.bad()) throw FileError(path, "read error");
    return s.str();
}

}  // namespace

template <class T>
Dense<T> read_mtx(const std::string& path) {
    const std::string text = read_text(path);
    // The banner: %%MatrixMarket matrix <format> <field> <symmetry>, keywords in any case.
    const std::size_t eol = std::min(text.find('\n'), text.size());
    std::istringstream banner(text.substr(0, eol));
    std::string magic, object, format, field, symmetry;
    banner >> magic >> object >> format >> field >> symmetry;
    if (lower(magic) != "%%matrixmarket")
        throw FileError(path, "bad magic: not a Matrix Market file (the first line must start with %%MatrixMarket)");
    object = lower(object);
    format = lower(format);
    field = lower(field);
    symmetry = lower(symmetry);
    if (object != "matrix") throw FileError(path, fmt::format("unsupported Matrix Market object '{}'", object));
    if (format == "coordinate")
        throw FileError(path, "unsupported Matrix Market format 'coordinate' (sparse); starfact reads dense 'array' "
                              "files");
    if (format != "array") throw FileError(path, fmt::format("unsupported Matrix Market format '{}'", format));
    if (field != "real" && field != "integer" && field != "double")
        throw FileError(path, fmt::format("unsupported Matrix Market field '{}' (starfact reads real and integer)",
                                          field));
    if (symmetry != "general" && symmetry != "symmetric")
        throw FileError(path, fmt::format("unsupported Matrix Market symmetry '{}' (starfact reads general and "
                                          "symmetric)", symmetry));

    Scanner scan(path, text);
    std::string line;
    // The banner and the comments start with '%': the first other line gives the size.
    if (!scan.next_content_line(line)) throw FileError(path, "truncated: no size line");
    std::istringstream sizes(line);
    long long m = -1, n = -1;
    std::string extra;
    if (!(sizes >> m >> n) || (sizes >> extra) || m < 0 || n < 0)
        throw FileError(path, fmt::format("line {}: bad size line '{}' (an array file gives 'rows columns')",
                                          scan.line(), line));
    // The orders are ints (LAPACK's); the element count is 64-bit.
    if (m > INT_MAX || n > INT_MAX)
        throw FileError(path, fmt::format("wrong dimensions: {} x {} has an order beyond 2^31-1 (matrix orders are "
                                          "32-bit ints)",
                                          m, n));
    const bool symmetric = symmetry == "symmetric";
    if (symmetric && m != n)
        throw FileError(path, fmt::format("wrong dimensions: a symmetric matrix must be square, the size line says "
                                          "{} x {}", m, n));
    const std::size_t expected =
        symmetric ? static_cast<std::size_t>(n) * (n + 1) / 2 : static_cast<std::size_t>(m) * n;
    // Every value takes at least two bytes (a digit and a separator, the last one one): a size
    // line that promises more values than the text can hold is truncation, found before the
    // matrix is allocated.
    if (expected > 0 && scan.remaining() < 2 * expected - 1)
        throw FileError(path, fmt::format("truncated data: {} x {} {} needs {} values, the file has {} bytes left for "
                                          "them",
                                          m, n, symmetry, expected, scan.remaining()));
    detail::require_memory(path, static_cast<std::size_t>(m) * n * sizeof(T), fmt::format("{} x {}", m, n));
    Dense<T> out;
    out.ndim = 2;
    out.m = static_cast<int>(m);
    out.n = static_cast<int>(n);
    out.dtype = field == "integer" ? "integer" : "real";
    out.data.assign(static_cast<std::size_t>(m) * n, T(0));
    std::size_t got = 0;
    double v = 0.0;
    for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j)
        for (std::size_t i = symmetric ? j : 0; i < static_cast<std::size_t>(m); ++i) {
            if (!scan.next_value(v))
                throw FileError(path, fmt::format("truncated data: {} x {} {} needs {} values, the file holds {}", m,
                                                  n, symmetry, expected, got));
            ++got;
            out.data[i + j * m] = static_cast<T>(v);
            if (symmetric) out.data[j + i * m] = static_cast<T>(v);
        }
    if (scan.next_value(v))
        throw FileError(path, fmt::format("line {}: more values than the {} x {} {} matrix holds ({})", scan.line() + 1,
                                          m, n, symmetry, expected));
    return out;
}

template <class T>
void write_mtx(const std::string& path, int m, int n, const T* A, int lda) {
    if (m < 0 || n < 0) throw FileError(path, fmt::format("negative matrix dimensions {} x {}", m, n));
    if (lda < std::max(1, m)) throw FileError(path, fmt::format("lda = {} < max(1, m = {})", lda, m));
    detail::AtomicFile out(path);
    fmt::memory_buffer buf;
    fmt::format_to(std::back_inserter(buf), "%%MatrixMarket matrix array real general\n% written by starfact\n{} {}\n",
                   m, n);
    for (int j = 0; j < n; ++j) {
        // fmt's shortest representation reads back to the same T.
        for (int i = 0; i < m; ++i) fmt::format_to(std::back_inserter(buf), "{}\n", A[i + std::size_t(j) * lda]);
        if (buf.size() > (1u << 20)) {
            out.write(buf.data(), buf.size());
            buf.clear();
        }
    }
    out.write(buf.data(), buf.size());
    out.commit();
}

template Dense<float> read_mtx<float>(const std::string&);
template Dense<double> read_mtx<double>(const std::string&);
template void write_mtx<float>(const std::string&, int, int, const float*, int);
template void write_mtx<double>(const std::string&, int, int, const double*, int);

}  // namespace starfact::io
