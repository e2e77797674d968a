// AtomicFile: mkstemp beside the destination, write, fsync, rename.
#include "io/atomic_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "io/io.hpp"

namespace starfact::io::detail {

std::string directory_of(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
    const std::size_t slash = path_.find_last_of('/');
    const std::string name = slash == std::string::npos ? path_ : path_.substr(slash + 1);
    if (name.empty()) throw FileError(path_, "names a directory, not a file");
    tmp_ = directory_of(path_) + "/." + name + ".XXXXXX";
    std::vector<char> buf(tmp_.begin(), tmp_.end());
    buf.push_back('\0');
    const int fd = mkstemp(buf.data());
    if (fd < 0)
        throw FileError(path_, fmt::format("cannot create a file in directory '{}': {}", directory_of(path_),
                                           std::strerror(errno)));
    tmp_.assign(buf.data());
    // mkstemp creates the file 0600; the result gets the usual permissions (0666 less the umask).
    const mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || (file_ = fdopen(fd, "wb")) == nullptr) {
        const int err = errno;
        close(fd);
        unlink(tmp_.c_str());
        throw FileError(path_, fmt::format("cannot open a temporary file: {}", std::strerror(err)));
    }
}

AtomicFile::~AtomicFile() {
    if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
    if (file_) std::fclose(file_);
    file_ = nullptr;
    if (!tmp_.empty()) unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, std::size_t bytes) {
    if (bytes == 0) return;
    if (std::fwrite(data, 1, bytes, file_) != bytes) {
        const int err = errno;
        discard();
        committed_ = true;  // nothing left to remove
        throw FileError(path_, fmt::format("write failed: {}", std::strerror(err)));
    }
}

void AtomicFile::commit() {
    int err = 0;
    if (std::fflush(file_) != 0 || fsync(fileno(file_)) != 0) err = errno;
    if (std::fclose(file_) != 0 && err == 0) err = errno;
    file_ = nullptr;
    if (err == 0 && std::rename(tmp_.c_str(), path_.c_str()) != 0) err = errno;
    if (err != 0) {
        unlink(tmp_.c_str());
        committed_ = true;
        throw FileError(path_, fmt::format("cannot complete the file: {}", std::strerror(err)));
    }
    committed_ = true;
}

}  // namespace starfact::io::detail
