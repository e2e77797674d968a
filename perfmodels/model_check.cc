// Model files without StarPU: reader, pre-flight, calibration lock, convergence analysis.
#include "perfmodels/model_check.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "common/runtime.hpp"

namespace starfact::models {
namespace fs = std::filesystem;

std::string codelet_dir() { return fmt::format("{}/codelets/{}", Runtime::perfmodel_dir(), kFormatVersion); }

std::string host_name() {
    if (const char* h = std::getenv("STARPU_HOSTNAME"); h != nullptr && *h != '\0') return h;
    char buf[256] = {};
    gethostname(buf, sizeof(buf) - 1);
    return buf;
}

std::string model_path(const std::string& symbol) { return fmt::format("{}/{}.{}", codelet_dir(), symbol, host_name()); }

int calibrate_level() {
    const char* c = std::getenv("STARPU_CALIBRATE");
    return c != nullptr ? std::atoi(c) : 0;
}

// ---- the reader ----------------------------------------------------------------------------
namespace {

struct Line {
    std::string text;
    int number;
    bool newline;  // ended by '\n' (StarPU asserts that history lines are)
};

/// The file's lines, walked as StarPU's fscanf calls do: comment lines ('#') and empty lines
/// are skipped before every value.
class Reader {
public:
    Reader(std::string path, const std::string& content) : path_(std::move(path)) {
        std::size_t start = 0;
        int number = 1;
        while (start < content.size()) {
            const std::size_t end = content.find('\n', start);
            const bool nl = end != std::string::npos;
            lines_.push_back({content.substr(start, (nl ? end : content.size()) - start), number++, nl});
            start = nl ? end + 1 : content.size();
        }
    }

    /// The tokens of the next significant line; `what` names what was expected if none is left.
    std::vector<std::string> next(const std::string& what) {
        while (pos_ < lines_.size()) {
            const Line& l = lines_[pos_];
            const std::size_t first = l.text.find_first_not_of(" \t\r");
            if (first == std::string::npos || l.text[first] == '#') {
                ++pos_;
                continue;
            }
            current_ = &lines_[pos_++];
            std::istringstream s(current_->text.substr(0, current_->text.find('#')));
            std::vector<std::string> tokens;
            for (std::string t; s >> t;) tokens.push_back(t);
            return tokens;
        }
        const int last = lines_.empty() ? 0 : lines_.back().number;
        fail(fmt::format("truncated: the file ends after line {} while {} was expected", last, what));
    }

    const Line& current() const { return *current_; }

    [[noreturn]] void fail(const std::string& reason) const { throw ModelFileError(path_, reason); }
    [[noreturn]] void fail_here(const std::string& reason) const {
        fail(fmt::format("line {}: {} (\"{}\")", current_ ? current_->number : 0, reason,
                         current_ ? current_->text.substr(0, 80) : ""));
    }

    long integer(const std::string& token, const std::string& what, int base = 10) const {
        errno = 0;
        char* end = nullptr;
        const long v = std::strtol(token.c_str(), &end, base);
        if (end == token.c_str() || *end != '\0' || errno != 0) fail_here(fmt::format("{} is not an integer", what));
        return v;
    }
    double real(const std::string& token, const std::string& what) const {
        char* end = nullptr;
        const double v = std::strtod(token.c_str(), &end);
        if (end == token.c_str() || *end != '\0') fail_here(fmt::format("{} is not a number", what));
        return v;
    }
    /// A line holding one integer in [lo, hi].
    long count(const std::string& what, long lo, long hi) {
        const auto t = next(what);
        if (t.size() != 1) fail_here(fmt::format("expected one integer ({})", what));
        const long v = integer(t[0], what);
        if (v < lo || v > hi) fail_here(fmt::format("{} = {} is out of range [{}, {}]", what, v, lo, hi));
        return v;
    }

private:
    std::string path_;
    std::vector<Line> lines_;
    std::size_t pos_ = 0;
    const Line* current_ = nullptr;
};

}  // namespace

bool Regression::fitted() const { return !std::isnan(a) && !std::isnan(b) && !std::isnan(c); }

bool Regression::valid(unsigned minimum) const {
    // StarPU 1.3's VALID_REGRESSION: more than 10% spread of sizes and enough samples.
    return fitted() && minx < (9 * maxx) / 10 && nsample >= minimum;
}

double Regression::predict_us(double size) const { return a * std::pow(size, b) + c; }

bool Regression::predicts(double size) const {
    return size >= 0.9 * static_cast<double>(minx) && size <= 1.1 * static_cast<double>(maxx);
}

namespace {

std::string arch_label(int type, int devid) {
    if (type == 0) return "cpu";
    if (type == 1) return fmt::format("cuda{}", devid);
    return fmt::format("type{}.{}", type, devid);
}

void read_regression(Reader& r, ArchModel& a) {
    const auto lin = r.next("the linear regression line");
    if (lin.size() != 9) r.fail_here(fmt::format("the linear regression line has {} values, not 9", lin.size()));
    for (int i = 0; i < 6; ++i) r.real(lin[i], "a regression value");
    long counts[3];
    for (int i = 6; i < 9; ++i) counts[i - 6] = r.integer(lin[i], "a regression count");
    if (counts[0] < 0 || counts[1] < 0 || counts[2] < 0) r.fail_here("a regression count is negative");
    a.regression.nsample = static_cast<unsigned>(counts[0]);
    a.regression.minx = static_cast<unsigned long>(counts[1]);
    a.regression.maxx = static_cast<unsigned long>(counts[2]);
    const auto nl = r.next("the non-linear regression line");
    if (nl.size() != 3) r.fail_here(fmt::format("the non-linear regression line has {} values, not 3", nl.size()));
    a.regression.a = r.real(nl[0], "a regression value");
    a.regression.b = r.real(nl[1], "a regression value");
    a.regression.c = r.real(nl[2], "a regression value");
    const auto ml = r.next("the multiple-regression coefficients");
    const long ncoeff = r.integer(ml[0], "the number of coefficients");
    if (ncoeff < 0 || static_cast<std::size_t>(ncoeff) + 1 != ml.size())
        r.fail_here(fmt::format("{} coefficients announced, {} present", ncoeff, ml.size() - 1));
    for (std::size_t i = 1; i < ml.size(); ++i) r.real(ml[i], "a coefficient");
}

Entry read_entry(Reader& r) {
    const auto t = r.next("a history entry");
    if (!r.current().newline) r.fail_here("the last history entry has no end of line (a cut-off write)");
    if (t.size() != 8 && t.size() != 7) r.fail_here(fmt::format("a history entry has {} fields, not 8", t.size()));
    const bool with_flops = t.size() == 8;
    Entry e;
    const long fp = r.integer(t[0], "the footprint", 16);
    if (fp < 0 || fp > 0xffffffffL) r.fail_here("the footprint is not a 32-bit hexadecimal number");
    e.footprint = static_cast<std::uint32_t>(fp);
    const long size = r.integer(t[1], "the size");
    if (size < 0) r.fail_here("negative size");
    e.size = static_cast<unsigned long>(size);
    std::size_t k = 2;
    e.flops = with_flops ? r.real(t[k++], "flops") : 0.0;
    e.mean_us = r.real(t[k++], "the mean");
    e.deviation_us = r.real(t[k++], "the deviation");
    e.sum = r.real(t[k++], "the sum");
    e.sum2 = r.real(t[k++], "the sum of squares");
    const long n = r.integer(t[k], "the number of samples");
    if (n < 0) r.fail_here("negative number of samples");
    e.nsample = static_cast<unsigned>(n);
    // StarPU asserts these (a NaN fails its ">= 0" too).
    if (!(e.mean_us >= 0)) r.fail_here("the mean is negative or NaN");
    if (!(e.deviation_us >= 0)) r.fail_here("the deviation is negative or NaN");
    if (!(e.sum >= 0) || !(e.sum2 >= 0)) r.fail_here("a sum is negative or NaN");
    if (!std::isnan(e.flops) && e.flops < 0) r.fail_here("negative flops");
    return e;
}

std::string read_locked(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw ModelFileError(path, fmt::format("cannot be read: {}", std::strerror(errno)));
    // StarPU writes its models under an fcntl write lock; its own readers take a read lock.
    struct flock lock {};
    lock.l_type = F_RDLCK;
    lock.l_whence = SEEK_SET;
    const bool locked = fcntl(fd, F_SETLKW, &lock) == 0;
    std::string content;
    char buf[65536];
    ssize_t got = 0;
    while ((got = ::read(fd, buf, sizeof(buf))) > 0) content.append(buf, static_cast<std::size_t>(got));
    const int read_errno = errno;
    if (locked) {
        lock.l_type = F_UNLCK;
        fcntl(fd, F_SETLK, &lock);
    }
    ::close(fd);
    if (got < 0) throw ModelFileError(path, fmt::format("cannot be read: {}", std::strerror(read_errno)));
    return content;
}

}  // namespace

ModelFile parse_model_file(const std::string& path) {
    ModelFile m;
    m.path = path;
    const std::string name = fs::path(path).filename().string();
    const std::string suffix = "." + host_name();
    m.symbol = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0
                   ? name.substr(0, name.size() - suffix.size())
                   : name;
    const std::string content = read_locked(path);
    if (content.empty()) return m;  // StarPU ignores an empty file ("is empty, ignoring it")
    Reader r(path, content);
    const auto v = r.next("the format version");
    if (v.size() != 1) r.fail_here("the first value is not a format version");
    const long version = r.integer(v[0], "the format version");
    if (version != kFormatVersion)
        r.fail(fmt::format("foreign format version {}: this StarPU (1.3) reads version {} only", version,
                           kFormatVersion));
    const long ncombs = r.count("the number of combinations", 0, 4096);
    for (long c = 0; c < ncombs; ++c) {
        const long ndevices = r.count("the number of devices of a combination", 1, 64);
        int type = -1, devid = 0, ncores = 0;
        std::string arch;
        for (long d = 0; d < ndevices; ++d) {
            const int t = static_cast<int>(r.count("a device type", 0, 5));
            const int id = static_cast<int>(r.count("a device id", 0, 1 << 20));
            const int cores = static_cast<int>(r.count("a number of cores", 0, 1 << 20));
            if (d == 0) {
                type = t;
                devid = id;
                ncores = cores;
            }
            arch += (arch.empty() ? "" : "+") + arch_label(t, id);
        }
        const long nimpls = r.count("the number of implementations", 0, 64);
        for (long impl = 0; impl < nimpls; ++impl) {
            ArchModel a;
            a.type = type;
            a.devid = devid;
            a.ncores = ncores;
            a.ndevices = static_cast<int>(ndevices);
            a.impl = static_cast<int>(impl);
            a.arch = impl == 0 ? arch : fmt::format("{}/impl{}", arch, impl);
            const long nentries = r.count("the number of entries", 0, 1L << 24);
            read_regression(r, a);
            for (long e = 0; e < nentries; ++e) a.entries.push_back(read_entry(r));
            m.archs.push_back(std::move(a));
        }
    }
    return m;
}

std::vector<std::string> model_files(const std::string& prefix) {
    std::vector<std::string> out;
    const std::string dir = codelet_dir();
    const std::string suffix = "." + host_name();
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return out;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
        if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
        out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// ---- pre-flight ----------------------------------------------------------------------------
namespace {

/// Whether a file can be created in `dir` (tried, not guessed from the mode bits: root ignores
/// them, a read-only file system does not). Returns 0 or the errno.
int probe_create(const std::string& dir) {
    std::string tmpl = dir + "/.starfact-probe-XXXXXX";
    const int fd = mkstemp(tmpl.data());
    if (fd < 0) return errno;
    ::close(fd);
    ::unlink(tmpl.c_str());
    return 0;
}

/// A directory StarPU creates at start: an existing one must be a directory; a missing one must
/// be creatable (StarPU aborts otherwise). Returns the error, or "" when fine.
std::string check_directory(const fs::path& dir, bool must_write, bool* exists) {
    std::error_code ec;
    *exists = false;
    fs::path p = dir;
    while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();
    if (p.empty()) p = ".";
    if (!fs::is_directory(p, ec))
        return fmt::format("'{}' is not a directory, so StarPU cannot use '{}' (it aborts). Fix: remove or rename '{}', or "
                           "point STARPU_HOME (or STARPU_PERF_MODEL_DIR) elsewhere",
                           p.string(), dir.string(), p.string());
    *exists = p == dir;
    if (!*exists || must_write) {
        const int err = probe_create(p.string());
        if (err != 0)
            return *exists ? fmt::format("'{}' is not writable ({}), and calibration saves the models there "
                                         "(StarPU aborts when it cannot). Fix: make it writable (chmod u+w), or "
                                         "calibrate into another directory (--home DIR or STARPU_HOME=DIR)",
                                         dir.string(), std::strerror(err))
                           : fmt::format("'{}' does not exist and cannot be created in '{}' ({}); StarPU would abort. "
                                         "Fix: make '{}' writable, or set STARPU_HOME to a writable directory",
                                         dir.string(), p.string(), std::strerror(err), p.string());
    }
    return "";
}

bool has_host_files(const fs::path& dir) {
    std::error_code ec;
    const std::string host = host_name() + ".";
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (e.path().filename().string().compare(0, host.size(), host) == 0) return true;
    return false;
}

}  // namespace

PreflightResult preflight(bool calibrating) {
    PreflightResult r;
    const fs::path base = Runtime::perfmodel_dir();
    const fs::path codelets = codelet_dir();
    for (const fs::path& dir : {base, codelets, base / "bus", base / "debug"}) {
        const bool write = calibrating && dir == codelets;
        bool exists = false;
        const std::string e = check_directory(dir, write, &exists);
        if (!e.empty()) {
            r.errors.push_back(e);
            return r;  // the rest depends on it
        }
    }
    std::error_code ec;
    const int err = fs::exists(codelets, ec) ? probe_create(codelets.string()) : 0;
    if (err != 0 && !calibrating)
        r.notes.push_back(fmt::format("'{}' is not writable ({}): if a model needs calibration StarPU will try to save "
                                      "it at shutdown and abort; calibrate with a writable STARPU_HOME first",
                                      codelets.string(), std::strerror(err)));
    const fs::path bus = base / "bus";
    if (fs::exists(bus, ec) && probe_create(bus.string()) != 0 && !has_host_files(bus))
        r.errors.push_back(fmt::format("'{}' holds no bus calibration for host '{}' and is not writable: StarPU "
                                       "would calibrate the bus and abort when saving it. Fix: make it writable, "
                                       "or set STARPU_HOME to a writable directory",
                                       bus.string(), host_name()));
    const bool reload = calibrate_level() != 2;
    for (const std::string& path : model_files()) {
        try {
            const ModelFile m = parse_model_file(path);
            if (m.archs.empty() && fs::file_size(path) == 0)
                r.notes.push_back(fmt::format("'{}' is empty (StarPU ignores it and recalibrates)", path));
        } catch (const ModelFileError& e) {
            if (reload)
                r.errors.push_back(fmt::format(
                    "'{}': {}. StarPU 1.3 aborts on such a file. Fix: delete it (the model is recalibrated by the next "
                    "runs; `starfact calibrate` does it at once), or restore it from a copy; STARPU_CALIBRATE=2 "
                    "ignores and overwrites every model",
                    path, e.reason()));
            else
                r.notes.push_back(fmt::format("'{}': {} (not loaded with STARPU_CALIBRATE=2; it will be overwritten)",
                                              path, e.reason()));
        }
        if (calibrating) {
            const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);  // no O_TRUNC: nothing changes
            if (fd < 0)
                r.errors.push_back(fmt::format("'{}' cannot be written ({}), and calibration saves every model at the "
                                               "end (StarPU aborts when it cannot). Fix: chmod u+w '{}', or calibrate "
                                               "into another directory (--home DIR or STARPU_HOME=DIR)",
                                               path, std::strerror(errno), path));
            else
                ::close(fd);
        }
    }
    return r;
}

std::vector<std::string> preflight_or_throw(bool calibrating) {
    PreflightResult r = preflight(calibrating);
    if (!r.ok()) {
        std::string msg = r.errors.front();
        for (std::size_t i = 1; i < r.errors.size(); ++i) msg += "\n  " + r.errors[i];
        throw ModelFileError(Runtime::perfmodel_dir(), fmt::format("performance models: {}", msg));
    }
    return r.notes;
}

CalibrationLock::CalibrationLock() : path_(codelet_dir() + "/.starfact-calibrate.lock") {
    std::error_code ec;
    fs::create_directories(codelet_dir(), ec);
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw RuntimeError(fmt::format("cannot open the calibration lock '{}': {}", path_, std::strerror(errno)));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        waited_ = true;
        while (flock(fd_, LOCK_EX) != 0)
            if (errno != EINTR) throw RuntimeError(fmt::format("cannot lock '{}': {}", path_, std::strerror(errno)));
    }
}

CalibrationLock::~CalibrationLock() {
    if (fd_ >= 0) {
        flock(fd_, LOCK_UN);
        ::close(fd_);
    }
}

// ---- analysis ------------------------------------------------------------------------------
namespace {

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using Key = std::tuple<std::string, std::string, std::uint32_t>;

std::string key_name(const Key& k) {
    return fmt::format("{} on {} (footprint {:08x})", std::get<0>(k), std::get<1>(k), std::get<2>(k));
}

void outlier_warnings(const Key& key, const std::vector<const Sample*>& group, const ReportLimits& lim,
                      std::vector<std::string>& warnings) {
    if (group.size() < 3) return;
    std::vector<double> d;
    for (const Sample* s : group) d.push_back(s->duration_us);
    const double med = median_of(d);
    double sum = 0, sum2 = 0;
    for (double x : d) {
        sum += x;
        sum2 += x * x;
    }
    int reported = 0, more = 0;
    for (const Sample* s : group) {
        const double x = s->duration_us;
        bool out = med > 0 && (x > lim.outlier_ratio * med || x * lim.outlier_ratio < med);
        double sigmas = 0;
        if (!out && group.size() >= 5) {
            const double n = static_cast<double>(group.size() - 1);
            const double mean_o = (sum - x) / n;
            const double var_o = std::max(0.0, (sum2 - x * x) / n - mean_o * mean_o);
            const double sd_o = std::sqrt(var_o);
            if (sd_o > 0) {
                sigmas = std::abs(x - mean_o) / sd_o;
                out = sigmas > lim.outlier_sigmas;
            }
        }
        if (!out) continue;
        if (reported++ >= 3) {
            ++more;
            continue;
        }
        warnings.push_back(fmt::format("outlier sample: {}: {:.1f} us on worker {}, {:.2f} x the median {:.1f} us{}",
                                       key_name(key), x, s->worker, med > 0 ? x / med : 0.0, med,
                                       sigmas > 0 ? fmt::format(", {:.1f} deviations from the others", sigmas) : ""));
    }
    if (more > 0) warnings.push_back(fmt::format("{}: {} more outlier samples", key_name(key), more));
}

}  // namespace

int Report::uncalibrated() const {
    return static_cast<int>(std::count_if(rows.begin(), rows.end(), [](const ReportRow& r) { return !r.calibrated(); }));
}

Report analyse(const std::vector<ModelFile>& files, const std::vector<Sample>& samples, unsigned minimum,
               const ReportLimits& lim) {
    std::map<Key, ReportRow> rows;
    for (const ModelFile& f : files)
        for (const ArchModel& a : f.archs)
            for (const Entry& e : a.entries) {
                ReportRow& r = rows[Key{f.symbol, a.arch, e.footprint}];
                r.symbol = f.symbol;
                r.arch = a.arch;
                r.footprint = e.footprint;
                r.size = e.size;
                r.nsample = e.nsample;
                r.mean_us = e.mean_us;
                r.rel_dev = e.mean_us > 0 ? e.deviation_us / e.mean_us : 0.0;
                r.by_regression = e.nsample < minimum && a.regression.valid(minimum) &&
                                  a.regression.predicts(static_cast<double>(e.size));
            }
    std::map<Key, std::vector<const Sample*>> groups;
    for (const Sample& s : samples) groups[Key{s.symbol, s.arch, s.footprint}].push_back(&s);

    Report rep;
    for (auto& [key, group] : groups) {
        ReportRow& r = rows[key];
        r.symbol = std::get<0>(key);
        r.arch = std::get<1>(key);
        r.footprint = std::get<2>(key);
        std::vector<double> d;
        std::map<int, std::vector<double>> per_worker;
        for (const Sample* s : group) {
            d.push_back(s->duration_us);
            per_worker[s->worker].push_back(s->duration_us);
            ++r.tasks;
            if (!s->had_prediction) ++r.fallback;
        }
        r.median_us = median_of(d);
        // Workers of one architecture share its model: they should agree.
        int slow = -1, fast = -1;
        double slow_m = 0, fast_m = 0;
        for (const auto& [w, v] : per_worker) {
            if (v.size() < 2) continue;
            const double m = median_of(v);
            if (slow < 0 || m > slow_m) slow = w, slow_m = m;
            if (fast < 0 || m < fast_m) fast = w, fast_m = m;
        }
        if (slow >= 0 && fast >= 0 && fast_m > 0 && slow_m > lim.worker_ratio * fast_m)
            rep.warnings.push_back(fmt::format("workers disagree: {}: worker {} median {:.1f} us, worker {} median {:.1f} "
                                               "us ({:.1f} x); they share one model",
                                               key_name(key), slow, slow_m, fast, fast_m, slow_m / fast_m));
        outlier_warnings(key, group, lim, rep.warnings);
    }
    for (auto& [key, r] : rows) {
        r.minimum = minimum;
        if (r.nsample >= 2 && r.rel_dev > lim.noisy_rel_dev)
            rep.warnings.push_back(fmt::format("noisy model: {}: deviation {:.0f}% of the mean {:.1f} us over {} "
                                               "samples (an outlier sample was probably kept)",
                                               key_name(key), 100 * r.rel_dev, r.mean_us, r.nsample));
        if (r.nsample > 0 && r.mean_us > 0 && r.median_us > 0 &&
            std::max(r.mean_us / r.median_us, r.median_us / r.mean_us) > lim.poisoned_ratio)
            rep.warnings.push_back(fmt::format("model far from the measurements: {}: the model's mean {:.1f} us vs this "
                                               "run's median {:.1f} us; StarPU rejects samples more than 50% off its "
                                               "mean, so an early outlier keeps it wrong: recalibrate with "
                                               "STARPU_CALIBRATE=2",
                                               key_name(key), r.mean_us, r.median_us));
        rep.rows.push_back(r);
    }
    return rep;
}

}  // namespace starfact::models
