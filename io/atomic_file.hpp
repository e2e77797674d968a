// AtomicFile: output written to a temporary file beside its destination and renamed over it
// once complete, so the destination never holds a partial file; and the other helpers internal
// to io/.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace starfact::io::detail {

class AtomicFile {
public:
    /// Creates the temporary file ".<name>.XXXXXX" in path's directory; throws FileError(path)
    /// when it cannot.
    explicit AtomicFile(std::string path);
    /// Removes the temporary file unless commit() succeeded.
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    /// Appends bytes; throws FileError on a short write (disk full, I/O error).
    void write(const void* data, std::size_t bytes);
    void write(const std::string& s) { write(s.data(), s.size()); }
    /// Flushes, syncs and renames the temporary file over the destination; throws FileError.
    void commit();

private:
    void discard() noexcept;
    std::string path_, tmp_;
    std::FILE* file_ = nullptr;
    bool committed_ = false;
};

/// The directory part of a path ("." when it has none).
std::string directory_of(const std::string& path);

/// Throws FileError(path) when `bytes` (what reading the file allocates; `what` describes it,
/// e.g. "shape (50000, 50000)") exceed this machine's physical memory: a clean error before the
/// allocation instead of std::bad_alloc or the out-of-memory killer.
void require_memory(const std::string& path, std::size_t bytes, const std::string& what);

}  // namespace starfact::io::detail
