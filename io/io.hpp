// The io layer's public header: dense matrices and batches of them read from and written to
// NumPy .npy files and Matrix Market array files, always column-major in memory.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace starfact::io {

/// A file that cannot be read or written as asked: a bad magic string or header, an unsupported
/// dtype or Matrix Market type, truncated data, wrong dimensions, an unreadable or unwritable
/// path. argument() is the path; reason() says what is wrong, without the path.
class FileError : public ArgumentError {
public:
    FileError(const std::string& path, const std::string& reason) : ArgumentError(path, reason), reason_(reason) {}
    const std::string& reason() const noexcept { return reason_; }

private:
    std::string reason_;
};

/// count matrices of m x n, column-major one after the other (matrix b starts at
/// data[b * m * n], formed in 64 bits; leading dimension m), as read from a file and converted
/// to T.
template <class T>
struct Dense {
    int ndim = 2;       ///< dimensions in the file: 1 (a vector, read as n x 1), 2, or 3 (a batch)
    int count = 1;      ///< matrices (the first dimension of a 3-D array)
    int m = 0, n = 0;   ///< rows and columns of each matrix
    std::string dtype;  ///< what the file held: "<f4", "<f8" (.npy), "real", "integer" (.mtx)
    std::vector<T> data;

    T* matrix(int b) { return data.data() + static_cast<std::size_t>(b) * m * n; }
    const T* matrix(int b) const { return data.data() + static_cast<std::size_t>(b) * m * n; }
};

enum class Format { Npy, MatrixMarket };

/// The format named by the path's extension (.npy, .mtx); throws FileError for any other.
Format format_of(const std::string& path);

/// Reads a .npy file: dtype '<f4' or '<f8', C or Fortran order, 1-D (a column), 2-D (one
/// m x n matrix) or 3-D (count x m x n, a batch). Values are converted to T. Every dimension
/// must fit in an int (orders and counts are LAPACK's ints); element counts are 64-bit, so
/// m * n and count * m * n may pass 2^31 (a (50000, 50000) matrix is read). The data is read
/// a block at a time: reading takes the matrices' memory and a few MiB more. Throws FileError
/// naming the file and what is wrong: missing or unreadable file, bad magic, bad header,
/// unsupported dtype or rank, a dimension beyond 2^31-1, truncated data, trailing bytes, more
/// data than this machine's memory holds (found before anything is allocated).
template <class T>
Dense<T> read_npy(const std::string& path);

/// Reads a Matrix Market array file: "%%MatrixMarket matrix array real|integer general" (m x n
/// values, column by column) or "... symmetric" (square; the lower triangle column by column,
/// mirrored into the upper one). Coordinate (sparse), complex and pattern files are refused.
/// m and n must fit in an int, m * n need not. Throws FileError as read_npy does, with the line
/// of a value that is not a number; a size line that promises more values than the file's bytes
/// can hold is truncation, found before the matrix is allocated.
template <class T>
Dense<T> read_mtx(const std::string& path);

/// read_npy or read_mtx, by the extension.
template <class T>
Dense<T> read_dense(const std::string& path);

/// Writes the m x n column-major matrix A (lda >= max(1, m)) as a 2-D Fortran-order .npy
/// file of T's dtype ('<f4' or '<f8'). The data goes to a temporary file in the same directory
/// that is renamed over `path` once complete, so `path` never holds a partial file. Throws
/// FileError when the file cannot be written (nothing is left behind).
template <class T>
void write_npy(const std::string& path, int m, int n, const T* A, int lda);

/// Writes count column-major m x n matrices (matrix b at A + b * m * n) as a 3-D array of
/// shape (count, m, n) in Fortran order; atomic as write_npy.
template <class T>
void write_npy_batch(const std::string& path, int count, int m, int n, const T* A);

/// Writes A (m x n, lda >= max(1, m)) as "%%MatrixMarket matrix array real general", with
/// enough digits to read back the same T; atomic as write_npy.
template <class T>
void write_mtx(const std::string& path, int m, int n, const T* A, int lda);

/// write_npy or write_mtx, by the extension.
template <class T>
void write_dense(const std::string& path, int m, int n, const T* A, int lda);

/// Throws FileError unless a file could be written at `path` now: a known extension, not a
/// directory, and its directory exists and accepts a new file (tried, then removed). Lets a
/// command refuse an unwritable output before it starts any work.
void check_writable(const std::string& path);

}  // namespace starfact::io
