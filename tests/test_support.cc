// Test machinery: seeds, temporary StarPU homes, the Runtime fixture, reference helpers.
#include "test_support.hpp"

#include <starpu.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>

#include "common/matgen.hpp"

namespace starfact::test {
namespace fs = std::filesystem;

std::uint64_t fresh_seed() {
    if (const char* s = std::getenv("STARFACT_TEST_SEED"); s != nullptr && *s != '\0') {
        char* end = nullptr;
        const unsigned long long v = std::strtoull(s, &end, 0);
        if (end != s && *end == '\0') return v;
        ADD_FAILURE() << "STARFACT_TEST_SEED='" << s << "' is not an unsigned integer; drawing a random seed";
    }
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(rd());
}

TempDir::TempDir(const std::string& prefix) {
    std::string templ = (fs::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + templ);
    path_ = templ;
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

namespace {
// Without $STARFACT_TEST_BUS_SEED, the bus files StarPU wrote for the first test of the process
// are kept here and copied into the later homes: only the bus calibration is shared, never
// the performance models.
std::unique_ptr<TempDir> g_bus_cache;

// $STARFACT_TEST_BUS_SEED (the user's), else $STARFACT_TEST_BUS_CACHE (a StarPU home that
// ctest's setup fixture calibrated once, see CMakeLists.txt) when it holds a calibration.
const char* bus_seed_env() {
    const char* s = std::getenv("STARFACT_TEST_BUS_SEED");
    if (s != nullptr && *s != '\0') return s;
    const char* c = std::getenv("STARFACT_TEST_BUS_CACHE");
    std::error_code ec;
    if (c != nullptr && *c != '\0' && fs::is_directory(fs::path(c) / ".starpu/sampling/bus", ec)) return c;
    return nullptr;
}

// The seed may name a StarPU home (it holds .starpu/sampling/bus), its .starpu directory
// (sampling/bus) or the bus directory itself (<host>.bandwidth, <host>.latency, ...). Only the
// bus files are copied, never performance models.
void seed_bus_files(const std::string& home) {
    const char* seed_dir = bus_seed_env();
    if (seed_dir == nullptr && g_bus_cache) seed_dir = g_bus_cache->path().c_str();
    if (seed_dir == nullptr) return;
    const fs::path src(seed_dir);
    std::error_code ec;
    if (!fs::is_directory(src, ec)) {
        ADD_FAILURE() << "STARFACT_TEST_BUS_SEED='" << seed_dir << "' is not a directory";
        return;
    }
    fs::path bus = src;
    for (const fs::path& candidate : {src / ".starpu/sampling/bus", src / "sampling/bus"})
        if (fs::is_directory(candidate, ec)) {
            bus = candidate;
            break;
        }
    const fs::path dst = fs::path(home) / ".starpu/sampling/bus";
    fs::create_directories(dst, ec);
    fs::copy(bus, dst, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
    if (ec) ADD_FAILURE() << "copying the bus calibration from " << bus << " to " << dst << ": " << ec.message();
}

// Called when a home is given up (after its Runtime, or the process using it, has finished).
void remember_bus_files(const std::string& home) {
    if (bus_seed_env() != nullptr || g_bus_cache) return;
    const fs::path bus = fs::path(home) / ".starpu/sampling/bus";
    std::error_code ec;
    if (!fs::is_directory(bus, ec) || fs::is_empty(bus, ec)) return;
    auto cache = std::make_unique<TempDir>("starfact-bus-");
    const fs::path dst = fs::path(cache->path()) / ".starpu/sampling/bus";
    fs::create_directories(dst, ec);
    fs::copy(bus, dst, fs::copy_options::recursive, ec);
    if (!ec) g_bus_cache = std::move(cache);
}
}  // namespace

ScopedStarpuHome::ScopedStarpuHome() {
    if (const char* prev = std::getenv("STARPU_HOME")) {
        had_previous_ = true;
        previous_ = prev;
    }
    seed_bus_files(dir_.path());
    setenv("STARPU_HOME", dir_.path().c_str(), 1);
}

ScopedStarpuHome::~ScopedStarpuHome() {
    remember_bus_files(dir_.path());
    if (had_previous_)
        setenv("STARPU_HOME", previous_.c_str(), 1);
    else
        unsetenv("STARPU_HOME");
}

SeededTest::SeededTest() : seed_(fresh_seed()) {
    const std::string msg =
        "seed = " + std::to_string(seed_) + "; replay with STARFACT_TEST_SEED=" + std::to_string(seed_);
    trace_ = std::make_unique<::testing::ScopedTrace>(__FILE__, __LINE__, msg);
    RecordProperty("seed", std::to_string(seed_));
    std::cout << "[   SEED   ] " << seed_ << std::endl;
}

void RuntimeTest::SetUp() {
    home_ = std::make_unique<ScopedStarpuHome>();
    runtime_ = std::make_unique<Runtime>();
}

RuntimeTest::~RuntimeTest() {
    runtime_.reset();
    home_.reset();
}

int RuntimeTest::ncuda() const { return runtime_ ? runtime_->ncuda() : 0; }

void RuntimeTest::shutdown_runtime() {
    runtime_.reset();
    home_.reset();
}

void RuntimeTest::restart_runtime(const RuntimeOptions& options) {
    runtime_.reset();
    runtime_ = std::make_unique<Runtime>(options);
}

template <class T>
HostMatrix<T> random_spd(int n, int ld, std::uint64_t seed) {
    HostMatrix<T> A(n, n, ld);
    if (n > 0) matgen::spd(n, seed, A.ptr(), ld);
    // matgen::spd's diagonal 2 b_ii + n does not dominate the off-diagonal row sum (up to
    // 2 (n-1)), and for n <= 2 it can be indefinite (n = 1: 2 b + 1 < 0 a quarter of the time).
    // Another n makes every row strictly dominant: SPD with a condition number below ~3.
    for (int i = 0; i < n; ++i) A(i, i) += static_cast<T>(n);
    return A;
}

template <class T>
HostMatrix<T> spd_failing_at(int n, int k, int ld, std::uint64_t seed) {
    HostMatrix<T> A(n, n, ld);
    if (n > 0) matgen::spd_failing_at(n, k, seed, A.ptr(), ld);
    return A;
}

template <class T>
HostMatrix<T> random_matrix(int m, int n, int ld, std::uint64_t seed) {
    HostMatrix<T> A(m, n, ld);
    if (m > 0 && n > 0) matgen::uniform(m, n, seed, A.ptr(), ld);
    return A;
}

template <class T>
int reference_potrf_info(char uplo, const HostMatrix<T>& A) {
    const int n = A.n;
    const bool lower = uplo == 'L' || uplo == 'l';
    // L(i, j), i >= j, of the matrix as the uplo triangle stores it.
    std::vector<long double> L(static_cast<std::size_t>(n) * n, 0.0L);
    auto a = [&](int i, int j) { return static_cast<long double>(lower ? A(i, j) : A(j, i)); };
    auto l = [&](int i, int j) -> long double& {
        return L[static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * n];
    };
    for (int j = 0; j < n; ++j) {
        long double ajj = a(j, j);
        for (int k = 0; k < j; ++k) ajj -= l(j, k) * l(j, k);
        if (ajj <= 0 || std::isnan(ajj)) return j + 1;
        l(j, j) = std::sqrt(ajj);
        for (int i = j + 1; i < n; ++i) {
            long double s = a(i, j);
            for (int k = 0; k < j; ++k) s -= l(i, k) * l(j, k);
            l(i, j) = s / l(j, j);
        }
    }
    return 0;
}

::testing::AssertionResult ResidualPasses(const char* expr, double ratio) {
    // A ratio is a quotient of norms: a negative one is an error code (LAPACKE's NaN check
    // returns -5 from lange/lansy), never a pass.
    if (checks::passes(ratio) && ratio >= 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << expr << " = " << ratio << ", which is not finite or not below "
                                         << checks::kThreshold;
}

template HostMatrix<float> random_spd<float>(int, int, std::uint64_t);
template HostMatrix<double> random_spd<double>(int, int, std::uint64_t);
template HostMatrix<float> spd_failing_at<float>(int, int, int, std::uint64_t);
template HostMatrix<double> spd_failing_at<double>(int, int, int, std::uint64_t);
template HostMatrix<float> random_matrix<float>(int, int, int, std::uint64_t);
template HostMatrix<double> random_matrix<double>(int, int, int, std::uint64_t);
template int reference_potrf_info<float>(char, const HostMatrix<float>&);
template int reference_potrf_info<double>(char, const HostMatrix<double>&);

}  // namespace starfact::test
