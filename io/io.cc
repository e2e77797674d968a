// The io layer's dispatch by extension and the output check.
#include "io/io.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "io/atomic_file.hpp"

namespace starfact::io {
namespace {

bool ends_with(const std::string& s, const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

namespace detail {

void require_memory(const std::string& path, std::size_t bytes, const std::string& what) {
    const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (have > 0 && static_cast<double>(bytes) > have)
        throw FileError(path, fmt::format("{} needs {:.1f} GiB of memory once read, this machine has {:.1f} GiB", what,
                                          static_cast<double>(bytes) / (1 << 30), have / (1 << 30)));
}

}  // namespace detail

Format format_of(const std::string& path) {
    if (ends_with(path, ".npy")) return Format::Npy;
    if (ends_with(path, ".mtx")) return Format::MatrixMarket;
    throw FileError(path, "unknown file type: the name must end in .npy (NumPy) or .mtx (Matrix Market array)");
}

template <class T>
Dense<T> read_dense(const std::string& path) {
    return format_of(path) == Format::Npy ? read_npy<T>(path) : read_mtx<T>(path);
}

template <class T>
void write_dense(const std::string& path, int m, int n, const T* A, int lda) {
    if (format_of(path) == Format::Npy)
        write_npy(path, m, n, A, lda);
    else
        write_mtx(path, m, n, A, lda);
}

void check_writable(const std::string& path) {
    format_of(path);
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw FileError(path, "is a directory, not a file");
    const std::string dir = detail::directory_of(path);
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw FileError(path, fmt::format("directory '{}' does not exist", dir));
    // Creating (and dropping) the temporary file is the only reliable test: permissions, ACLs,
    // read-only mounts, quotas.
    detail::AtomicFile probe(path);
}

template Dense<float> read_dense<float>(const std::string&);
template Dense<double> read_dense<double>(const std::string&);
template void write_dense<float>(const std::string&, int, int, const float*, int);
template void write_dense<double>(const std::string&, int, int, const double*, int);

}  // namespace starfact::io
