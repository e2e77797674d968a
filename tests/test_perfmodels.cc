// Performance models, calibration and traces: the model-file reader against hand-written and
// StarPU-written files, the pre-flight on planted truncated, corrupt, foreign-version and
// read-only cases (through the library and through the command line, which must exit 2 naming
// the file instead of aborting inside StarPU), the convergence report on planted outliers,
// `starfact calibrate` producing files that parse (also two at once on one home), and traces
// that list exactly the tasks of a small factorization.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "codelets/codelets.hpp"
#include "codelets/trace.hpp"
#include "common/matgen.hpp"
#include "perfmodels/model_check.hpp"
#include "test_support.hpp"
#include "tile_algorithms/tile_algorithms.hpp"

extern char** environ;

namespace starfact::test {
namespace {
namespace fs = std::filesystem;

// ---- helpers -------------------------------------------------------------------------------

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

void write_file(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
}

/// Sets environment variables for the lifetime of the object, then restores them.
class ScopedEnvVars {
public:
    ScopedEnvVars(std::initializer_list<std::pair<const char*, std::string>> vars) {
        for (const auto& [name, value] : vars) {
            const char* old = std::getenv(name);
            saved_.push_back({name, old != nullptr, old ? old : ""});
            setenv(name, value.c_str(), 1);
        }
    }
    ~ScopedEnvVars() {
        for (const auto& s : saved_)
            if (s.had)
                setenv(s.name, s.value.c_str(), 1);
            else
                unsetenv(s.name);
    }
    ScopedEnvVars(const ScopedEnvVars&) = delete;
    ScopedEnvVars& operator=(const ScopedEnvVars&) = delete;

private:
    struct Saved {
        const char* name;
        bool had;
        std::string value;
    };
    std::vector<Saved> saved_;
};

/// A StarPU home (with the bus calibration seeded, as every test's) whose model directory the
/// tests plant files in; the host name is fixed so file names are known.
class PlantedHome {
public:
    PlantedHome() : env_({{"STARPU_HOSTNAME", "plantedhost"}}) { unsetenv("STARPU_PERF_MODEL_DIR"); }
    const std::string& path() const { return home_.path(); }
    std::string codelets() const { return home_.path() + "/.starpu/sampling/codelets/45"; }
    std::string model(const std::string& symbol) const { return codelets() + "/" + symbol + ".plantedhost"; }

private:
    ScopedStarpuHome home_;
    ScopedEnvVars env_;
};

/// A model file in StarPU 1.3's format: one CPU combination with the given history entries
/// (footprint, mean, deviation, nsample).
struct PlantEntry {
    std::uint32_t footprint;
    double mean, dev;
    unsigned n;
};
struct PlantDevice {
    int type, devid;  // StarPU's worker type (0 CPU, 1 CUDA) and device id
};
std::string model_text(const std::vector<PlantEntry>& entries, int version = 45,
                       const std::vector<PlantDevice>& devices = {{0, 0}}) {
    std::string s = fmt::format("##################\n# Performance Model Version\n{}\n\n####################\n# COMBs\n"
                                "# number of combinations\n{}\n",
                                version, devices.size());
    for (std::size_t c = 0; c < devices.size(); ++c) {
        s += fmt::format("####################\n# COMB_{}\n# number of types devices\n1\n"
                         "####################\n# DEV_0\n# device type (CPU - 0, CUDA - 1)\n{}\n"
                         "####################\n# DEV_0\n# device id \n{}\n####################\n# DEV_0\n"
                         "# number of cores \n1\n##########\n# number of implementations\n1\n#####\n"
                         "# Model for dev{}_impl0 (Comb{})\n# number of entries\n{}\n"
                         "# sumlnx\tsumlnx2\t\tsumlny\t\tsumlnxlny\talpha\t\tbeta\t\tn\tminx\t\tmaxx\n"
                         "0.000000e+00   \t0.000000e+00   \t0.000000e+00   \t0.000000e+00   \tnan            \t"
                         "nan            \t0\t0              \t0              \n# a\t\tb\t\tc\n"
                         "nan            \tnan            \tnan            \n# not multiple-regression-base\n0\n"
                         "# hash\t\tsize\t\tflops\t\tmean (us)\tdev (us)\tsum\t\tsum2\t\tn\n",
                         c, devices[c].type, devices[c].devid, devices[c].devid, c, entries.size());
        for (const PlantEntry& e : entries) {
            const double sum = e.mean * e.n, sum2 = e.n * (e.dev * e.dev + e.mean * e.mean);
            s += fmt::format("{:08x}\t{:<15}\t{:<15e}\t{:<15e}\t{:<15e}\t{:<15e}\t{:<15e}\t{}\n", e.footprint, 32768,
                             2.0e6, e.mean, e.dev, sum, sum2, e.n);
        }
        s += "\n";
    }
    return s;
}

/// The result of running the starfact executable.
struct Cli {
    bool exited = false;
    int code = -1;
    std::string out, err;
};

std::string cli_path() {
    std::error_code ec;
    const fs::path beside = fs::read_symlink("/proc/self/exe", ec).parent_path() / "starfact";
    if (!ec && fs::exists(beside)) return beside.string();
    return STARFACT_CLI_PATH;
}

/// A starfact child process with the current environment plus `env` ("NAME=value").
class Child {
public:
    Child(const std::vector<std::string>& args, const std::vector<std::string>& env) : io_("starfact-perf-") {
        std::vector<std::string> argv_s{cli_path()};
        argv_s.insert(argv_s.end(), args.begin(), args.end());
        std::vector<std::string> env_s;
        for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
        for (const std::string& kv : env) {
            const std::string name = kv.substr(0, kv.find('=') + 1);
            env_s.erase(std::remove_if(env_s.begin(), env_s.end(),
                                       [&](const std::string& e) { return e.compare(0, name.size(), name) == 0; }),
                        env_s.end());
            env_s.push_back(kv);
        }
        std::vector<char*> argv, envp;
        for (auto& a : argv_s) argv.push_back(a.data());
        argv.push_back(nullptr);
        for (auto& e : env_s) envp.push_back(e.data());
        envp.push_back(nullptr);
        const std::string out = io_.path() + "/out", err = io_.path() + "/err";
        pid_ = fork();
        if (pid_ == 0) {
            if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(126);
            execve(argv[0], argv.data(), envp.data());
            _exit(127);
        }
    }
    Cli wait(std::chrono::seconds timeout = std::chrono::seconds(120)) {
        Cli r;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        int status = 0;
        while (waitpid(pid_, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                ADD_FAILURE() << "starfact did not finish in " << timeout.count() << " s; killed";
                kill(pid_, SIGKILL);
                waitpid(pid_, &status, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        r.exited = WIFEXITED(status);
        r.code = r.exited ? WEXITSTATUS(status) : WTERMSIG(status);
        r.out = slurp(io_.path() + "/out");
        r.err = slurp(io_.path() + "/err");
        return r;
    }

private:
    TempDir io_;
    pid_t pid_ = -1;
};

Cli run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    return Child(args, env).wait();
}

std::string describe(const Cli& r) {
    return (r.exited ? "exit code " + std::to_string(r.code) : "killed by signal " + std::to_string(r.code)) +
           "\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err;
}

std::vector<std::map<std::string, std::string>> read_csv(const std::string& path) {
    std::ifstream f(path);
    std::string line;
    std::vector<std::string> names;
    std::vector<std::map<std::string, std::string>> rows;
    auto split = [](const std::string& l) {
        std::vector<std::string> v;
        std::stringstream s(l);
        for (std::string c; std::getline(s, c, ',');) v.push_back(c);
        if (!l.empty() && l.back() == ',') v.emplace_back();
        return v;
    };
    if (std::getline(f, line)) names = split(line);
    while (std::getline(f, line)) {
        const auto cells = split(line);
        std::map<std::string, std::string> row;
        for (std::size_t i = 0; i < names.size() && i < cells.size(); ++i) row[names[i]] = cells[i];
        if (cells.size() != names.size()) row["__bad"] = line;
        rows.push_back(row);
    }
    return rows;
}

// ---- the reader ----------------------------------------------------------------------------

class ModelFiles : public SeededTest {};

TEST_F(ModelFiles, ReadsAHandWrittenModel) {
    PlantedHome home;
    std::mt19937_64 rng(seed());
    std::vector<PlantEntry> entries;
    for (int i = 0; i < 5; ++i)
        entries.push_back({static_cast<std::uint32_t>(rng()), 10.0 + static_cast<double>(rng() % 1000), 1.5,
                           static_cast<unsigned>(1 + rng() % 50)});
    write_file(home.model("starfact_gemm_d"), model_text(entries));
    const models::ModelFile m = models::parse_model_file(home.model("starfact_gemm_d"));
    EXPECT_EQ(m.symbol, "starfact_gemm_d");
    ASSERT_EQ(m.archs.size(), 1u);
    EXPECT_EQ(m.archs[0].arch, "cpu");
    ASSERT_EQ(m.archs[0].entries.size(), entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        EXPECT_EQ(m.archs[0].entries[i].footprint, entries[i].footprint);
        EXPECT_NEAR(m.archs[0].entries[i].mean_us, entries[i].mean, 1e-5 * entries[i].mean);
        EXPECT_EQ(m.archs[0].entries[i].nsample, entries[i].n);
    }
    EXPECT_EQ(models::model_files(), std::vector<std::string>{home.model("starfact_gemm_d")});
    EXPECT_TRUE(models::preflight(false).ok());
    // A machine with a CPU and two GPUs: one combination each.
    write_file(home.model("starfact_gemm_s"), model_text(entries, 45, {{0, 0}, {1, 0}, {1, 1}}));
    const models::ModelFile g = models::parse_model_file(home.model("starfact_gemm_s"));
    ASSERT_EQ(g.archs.size(), 3u);
    EXPECT_EQ(g.archs[1].arch, "cuda0");
    EXPECT_EQ(g.archs[2].arch, "cuda1");
    EXPECT_EQ(g.archs[2].entries.size(), entries.size());
    EXPECT_TRUE(models::preflight(false).ok());
}

// Every cut of a valid file that loses part of its data is refused; a cut that parses kept
// every entry (it only lost trailing blank lines).
TEST_F(ModelFiles, EveryTruncationThatLosesDataIsRefused) {
    PlantedHome home;
    std::mt19937_64 rng(seed());
    std::vector<PlantEntry> entries;
    for (int i = 0; i < 3; ++i) entries.push_back({static_cast<std::uint32_t>(rng()), 100.0 + i, 2.0, 12});
    const std::string full = model_text(entries);
    const std::string path = home.model("starfact_potrf_d");
    int refused = 0;
    for (std::size_t len = 1; len < full.size(); ++len) {
        write_file(path, full.substr(0, len));
        try {
            const models::ModelFile m = models::parse_model_file(path);
            ASSERT_EQ(m.archs.size(), 1u) << "cut at " << len << " bytes was accepted";
            ASSERT_EQ(m.archs[0].entries.size(), entries.size()) << "cut at " << len << " bytes was accepted";
            ASSERT_EQ(m.archs[0].entries.back().nsample, 12u) << "cut at " << len;
        } catch (const models::ModelFileError& e) {
            ++refused;
            EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        }
    }
    EXPECT_GT(refused, static_cast<int>(full.size()) - 10);
}

TEST_F(ModelFiles, PreflightNamesTruncatedForeignAndCorruptFiles) {
    PlantedHome home;
    const std::vector<PlantEntry> e = {{0x1234abcdu, 50.0, 1.0, 11}};
    const std::string full = model_text(e);
    write_file(home.model("starfact_trsm_d"), full.substr(0, full.size() / 2));
    write_file(home.model("starfact_syrk_d"), model_text(e, 44));
    std::string negative = model_text({{0x1u, 50.0, 1.0, 11}});
    negative.replace(negative.find("5.000000e+01"), 12, "-5.00000e+01");
    write_file(home.model("starfact_gemm_s"), negative);
    write_file(home.model("starfact_potrf_s"), model_text(e));  // a good one
    write_file(home.codelets() + "/otherapp_kernel.plantedhost", "garbage");  // not ours: not checked
    const models::PreflightResult r = models::preflight(false);
    ASSERT_EQ(r.errors.size(), 3u);
    std::string all;
    for (const auto& s : r.errors) all += s + "\n";
    EXPECT_NE(all.find(home.model("starfact_trsm_d") + "': truncated"), std::string::npos) << all;
    EXPECT_NE(all.find(home.model("starfact_syrk_d") + "': foreign format version 44"), std::string::npos) << all;
    EXPECT_NE(all.find(home.model("starfact_gemm_s") + "': line"), std::string::npos) << all;
    EXPECT_NE(all.find("negative"), std::string::npos) << all;
    EXPECT_NE(all.find("Fix: delete it"), std::string::npos) << all;
    // STARPU_CALIBRATE=2 does not load them: notes, not errors.
    const ScopedEnvVars cal({{"STARPU_CALIBRATE", "2"}});
    const models::PreflightResult r2 = models::preflight(false);
    EXPECT_TRUE(r2.ok());
    EXPECT_EQ(r2.notes.size(), 3u);
}

TEST_F(ModelFiles, PreflightRefusesAReadOnlyDirectoryWhenCalibrating) {
    if (geteuid() == 0)
        GTEST_SKIP() << "running as root, which writes through chmod -w: the permission case is not tested here "
                        "(UnwritableDirectoryWithoutPermissions covers the check without permissions)";
    PlantedHome home;
    write_file(home.model("starfact_gemm_d"), model_text({{0x1u, 50.0, 1.0, 11}}));
    ASSERT_EQ(chmod(home.codelets().c_str(), 0555), 0);
    EXPECT_TRUE(models::preflight(false).ok());
    const models::PreflightResult r = models::preflight(true);
    chmod(home.codelets().c_str(), 0755);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.errors[0].find(home.codelets()), std::string::npos) << r.errors[0];
    EXPECT_NE(r.errors[0].find("not writable"), std::string::npos) << r.errors[0];
    // A read-only model file while calibrating.
    ASSERT_EQ(chmod(home.model("starfact_gemm_d").c_str(), 0444), 0);
    const models::PreflightResult r2 = models::preflight(true);
    ASSERT_FALSE(r2.ok());
    EXPECT_NE(r2.errors[0].find(home.model("starfact_gemm_d")), std::string::npos) << r2.errors[0];
}

// /proc/self refuses new files even to root: the same check without permissions.
TEST_F(ModelFiles, UnwritableDirectoryWithoutPermissions) {
    if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc on this system";
    const ScopedEnvVars env({{"STARPU_PERF_MODEL_DIR", "/proc/self/starfact-models"}});
    const models::PreflightResult r = models::preflight(false);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.errors[0].find("/proc/self/starfact-models"), std::string::npos) << r.errors[0];
    EXPECT_NE(r.errors[0].find("cannot be created"), std::string::npos) << r.errors[0];
}

// ---- the command line: exit 2 naming the file, never an abort in StarPU ---------------------

TEST_F(ModelFiles, CommandLineStopsBeforeStarpuOnAPlantedTruncatedFile) {
    PlantedHome home;
    const std::string full = model_text({{0x1u, 50.0, 1.0, 11}});
    const std::string bad = home.model("starfact_potrf_d");
    write_file(bad, full.substr(0, full.size() - 30));
    const std::vector<std::string> env = {"STARPU_HOME=" + home.path(), "STARPU_HOSTNAME=plantedhost"};
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"potrf", "-n", "64", "--nb", "32"}, {"getrf", "-n", "64", "--nb", "32"}, {"info"}}) {
        const Cli r = run_cli(args, env);
        ASSERT_TRUE(r.exited) << describe(r);
        EXPECT_EQ(r.code, 2) << describe(r);
        EXPECT_NE(r.err.find(bad), std::string::npos) << describe(r);
        EXPECT_NE(r.err.find("Fix"), std::string::npos) << describe(r);
        EXPECT_EQ(r.out, "") << "nothing may run: " << describe(r);
    }
    // The file is left as it was.
    EXPECT_EQ(slurp(bad), full.substr(0, full.size() - 30));
}

TEST_F(ModelFiles, CommandLineStopsOnAnUnwritableModelDirectoryWhenCalibrating) {
    const Cli r = run_cli({"calibrate", "--nb", "16", "--ops", "potrf"},
                          {"STARPU_PERF_MODEL_DIR=/proc/self/starfact-models"});
    ASSERT_TRUE(r.exited) << describe(r);
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_NE(r.err.find("/proc/self/starfact-models"), std::string::npos) << describe(r);
}

// ---- the report ----------------------------------------------------------------------------

std::vector<models::Sample> jittered(const std::string& symbol, int worker, double us, int n, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> jitter(0.9, 1.1);
    std::vector<models::Sample> s;
    for (int i = 0; i < n; ++i) s.push_back({symbol, "cpu", worker, 0xabcu, us * jitter(rng), true});
    return s;
}

bool any_contains(const std::vector<std::string>& v, const std::string& what) {
    return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(what) != std::string::npos; });
}

TEST_F(ModelFiles, ReportFlagsAPlantedOutlierAndNothingOnCleanSamples) {
    std::mt19937_64 rng(seed());
    const double us = 50.0 + static_cast<double>(rng() % 500);
    auto clean = jittered("starfact_gemm_d", 0, us, 12, rng);
    const auto other = jittered("starfact_gemm_d", 1, us, 12, rng);
    clean.insert(clean.end(), other.begin(), other.end());
    const models::Report ok = models::analyse({}, clean, 10);
    EXPECT_TRUE(ok.warnings.empty()) << ok.warnings.front();
    ASSERT_EQ(ok.rows.size(), 1u);
    EXPECT_EQ(ok.rows[0].tasks, 24);
    EXPECT_EQ(ok.rows[0].fallback, 0);

    auto planted = clean;
    const std::size_t at = rng() % planted.size();
    planted[at].duration_us = 8 * us;
    planted[at].had_prediction = false;
    const models::Report bad = models::analyse({}, planted, 10);
    ASSERT_TRUE(any_contains(bad.warnings, "outlier sample")) << "no warning for a sample at 8x the median";
    EXPECT_TRUE(any_contains(bad.warnings, fmt::format("on worker {}", planted[at].worker)));
    EXPECT_EQ(bad.rows[0].fallback, 1);
}

TEST_F(ModelFiles, ReportFlagsWorkersThatDisagreeAndPoisonedOrNoisyModels) {
    std::mt19937_64 rng(seed());
    const double us = 100.0 + static_cast<double>(rng() % 100);
    auto s = jittered("starfact_trsm_d", 0, us, 8, rng);
    const auto slow = jittered("starfact_trsm_d", 1, 3 * us, 8, rng);
    s.insert(s.end(), slow.begin(), slow.end());
    EXPECT_TRUE(any_contains(models::analyse({}, s, 10).warnings, "workers disagree"));

    PlantedHome home;
    // The file's mean is 6x what the tasks measured (an early outlier kept), and another entry
    // has a deviation of twice its mean.
    write_file(home.model("starfact_gemm_d"),
               model_text({{0xabcu, 6 * us, 0.1 * us, 12}, {0xdefu, us, 2 * us, 12}, {0x123u, us, 0.01 * us, 3}}));
    const models::ModelFile f = models::parse_model_file(home.model("starfact_gemm_d"));
    const models::Report rep = models::analyse({f}, jittered("starfact_gemm_d", 0, us, 12, rng), 10);
    EXPECT_TRUE(any_contains(rep.warnings, "model far from the measurements")) << rep.warnings.size();
    EXPECT_TRUE(any_contains(rep.warnings, "noisy model: starfact_gemm_d on cpu (footprint 00000def)"));
    EXPECT_EQ(rep.uncalibrated(), 1);  // 3 samples < 10
}

TEST_F(ModelFiles, ReportOnlyCommandReadsThePlantedFiles) {
    PlantedHome home;
    write_file(home.model("starfact_gemm_d"), model_text({{0xabcu, 100, 250, 12}, {0xdefu, 100, 1, 4}}));
    const Cli r = run_cli({"calibrate", "--report-only", "--format", "csv"},
                          {"STARPU_HOME=" + home.path(), "STARPU_HOSTNAME=plantedhost"});
    ASSERT_TRUE(r.exited) << describe(r);
    EXPECT_EQ(r.code, 1) << "one entry under the minimum: " << describe(r);
    EXPECT_NE(r.out.find("starfact_gemm_d,cpu,00000abc"), std::string::npos) << describe(r);
    EXPECT_NE(r.out.find("starfact_gemm_d,cpu,00000def"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("noisy model: starfact_gemm_d on cpu (footprint 00000abc)"), std::string::npos) << describe(r);
}

// ---- calibration ---------------------------------------------------------------------------

/// Checks that a calibrated home holds parseable models for the Cholesky kernels with at least
/// `minimum` CPU samples for one footprint each.
void expect_calibrated_cholesky(const std::string& home, unsigned minimum) {
    const ScopedEnvVars env({{"STARPU_HOME", home}});
    for (const char* k : {"potrf", "trsm", "syrk", "gemm"}) {
        const std::string path = models::model_path(fmt::format("starfact_{}_d", k));
        ASSERT_TRUE(fs::exists(path)) << path;
        models::ModelFile m;
        ASSERT_NO_THROW(m = models::parse_model_file(path)) << path;
        unsigned best = 0;
        for (const auto& a : m.archs)
            for (const auto& e : a.entries)
                if (a.arch == "cpu") best = std::max(best, e.nsample);
        EXPECT_GE(best, minimum) << path;
    }
}

TEST_F(ModelFiles, CalibrateProducesModelFilesThatParse) {
    ScopedStarpuHome home;
    // Many rounds allowed: on a loaded machine StarPU drops samples 50% off the mean.
    const Cli r = run_cli({"calibrate", "--nb", "48", "--ops", "potrf", "--min-samples", "3", "--max-rounds", "300",
                           "--format", "csv"},
                          {"STARPU_HOME=" + home.path(), "STARPU_NCPU=2"});
    ASSERT_TRUE(r.exited) << describe(r);
    ASSERT_EQ(r.code, 0) << describe(r);
    expect_calibrated_cholesky(home.path(), 3);
    for (const char* k : {"potrf", "trsm", "syrk", "gemm"})
        EXPECT_NE(r.out.find(fmt::format("starfact_{}_d,cpu,", k)), std::string::npos) << describe(r);
    EXPECT_EQ(r.out.find(",UNDER"), std::string::npos) << describe(r);
    // The pre-flight of the next run accepts what StarPU wrote.
    const ScopedEnvVars env({{"STARPU_HOME", home.path()}});
    EXPECT_TRUE(models::preflight(true).ok());
}

// geqrf's round runs a flat and a tree factorization, so every QR codelet gets a model, the tree
// kernels (TTQRT, TTMQR) included.
TEST_F(ModelFiles, CalibrateCoversTheQrTreeKernels) {
    ScopedStarpuHome home;
    const Cli r = run_cli({"calibrate", "--nb", "24", "--ops", "geqrf", "--min-samples", "3", "--max-rounds", "300",
                           "--format", "csv"},
                          {"STARPU_HOME=" + home.path(), "STARPU_NCPU=2", "STARPU_NCUDA=0"});
    ASSERT_TRUE(r.exited) << describe(r);
    ASSERT_EQ(r.code, 0) << describe(r);
    EXPECT_EQ(r.out.find(",UNDER"), std::string::npos) << describe(r);
    const ScopedEnvVars env({{"STARPU_HOME", home.path()}});
    for (const char* k : {"geqrt", "unmqr", "tsqrt", "tsmqr", "ttqrt", "ttmqr"}) {
        const std::string path = models::model_path(fmt::format("starfact_{}_d", k));
        ASSERT_TRUE(fs::exists(path)) << path;
        EXPECT_NO_THROW(models::parse_model_file(path)) << path;
        EXPECT_NE(r.out.find(fmt::format("starfact_{}_d,cpu,", k)), std::string::npos) << describe(r);
    }
}

// CPU workers only: what is tested is the two processes' reading and writing of one model
// directory. With a GPU, both processes' CUDA workers time their tasks on the one device at once,
// and StarPU drops every later sample more than 50% off a model's first one
// (STARPU_HISTORY_MAX_ERROR): a model whose first CUDA sample was taken before the other process
// loaded the GPU stays under the minimum however many rounds run, and calibrate rightly fails
// (seen on the H100: gemm and syrk at 1-2 samples after 1200 tasks each).
TEST_F(ModelFiles, TwoCalibrationsAtOnceOnOneHomeBothFinish) {
    ScopedStarpuHome home;
    const std::vector<std::string> args = {"calibrate", "--nb", "40", "--ops", "potrf", "--min-samples", "3",
                                           "--max-rounds", "300"};
    const std::vector<std::string> env = {"STARPU_HOME=" + home.path(), "STARPU_NCPU=1", "STARPU_NCUDA=0"};
    Child a(args, env), b(args, env);
    const Cli ra = a.wait(), rb = b.wait();
    ASSERT_TRUE(ra.exited && rb.exited) << describe(ra) << describe(rb);
    EXPECT_EQ(ra.code, 0) << describe(ra);
    EXPECT_EQ(rb.code, 0) << describe(rb);
    expect_calibrated_cholesky(home.path(), 3);
}

// ---- the batched models and their regression ----------------------------------------------

/// model_text() with StarPU's regression lines set: `n` samples over sizes [minx, maxx] and the
/// non-linear time_us = a * size^b + c.
std::string with_regression(std::string text, unsigned n, unsigned long minx, unsigned long maxx, double a, double b,
                            double c) {
    const std::string lin = "nan            \tnan            \t0\t0              \t0              \n";
    const std::string nl = "nan            \tnan            \tnan            \n";
    text.replace(text.find(lin), lin.size(), fmt::format("nan\tnan\t{}\t{}\t{}\n", n, minx, maxx));
    text.replace(text.find(nl), nl.size(), fmt::format("{:e}\t{:e}\t{:e}\n", a, b, c));
    return text;
}

TEST_F(ModelFiles, ReadsTheRegressionOfABatchedModel) {
    PlantedHome home;
    // Entries of sizes 32768 (model_text's): one calibrated, one under the minimum.
    const std::string path = home.model("starfact_batched_getrf_d");
    write_file(path, with_regression(model_text({{0x1u, 40, 1, 12}, {0x2u, 40, 1, 2}}), 30, 1000, 100000, 0.5, 0.75, 3));
    const models::ModelFile m = models::parse_model_file(path);
    ASSERT_EQ(m.archs.size(), 1u);
    const models::Regression& r = m.archs[0].regression;
    EXPECT_EQ(r.nsample, 30u);
    EXPECT_EQ(r.minx, 1000u);
    EXPECT_EQ(r.maxx, 100000u);
    EXPECT_DOUBLE_EQ(r.b, 0.75);
    EXPECT_TRUE(r.valid(10));
    EXPECT_FALSE(r.valid(31)) << "fewer samples than the minimum";
    EXPECT_NEAR(r.predict_us(4096), 0.5 * 512 + 3, 1e-9);
    EXPECT_TRUE(r.predicts(900) && r.predicts(110000));
    EXPECT_FALSE(r.predicts(899) || r.predicts(110001));
    // The entry under the minimum is predicted by the curve: calibrated, by regression.
    const models::Report rep = models::analyse({m}, {}, 10);
    ASSERT_EQ(rep.rows.size(), 2u);
    EXPECT_FALSE(rep.rows[0].by_regression);
    EXPECT_TRUE(rep.rows[1].by_regression);
    EXPECT_EQ(rep.uncalibrated(), 0);
    // Sizes outside the fitted range, or an unfitted curve (NaN), leave it to the history.
    write_file(path, with_regression(model_text({{0x2u, 40, 1, 2}}), 30, 1000, 2000, 0.5, 0.75, 3));
    EXPECT_EQ(models::analyse({models::parse_model_file(path)}, {}, 10).uncalibrated(), 1);
    write_file(path, model_text({{0x2u, 40, 1, 2}}));
    EXPECT_FALSE(models::parse_model_file(path).archs[0].regression.fitted());
    // The pre-flight covers the batched models: a truncated one is named.
    const std::string full = with_regression(model_text({{0x1u, 40, 1, 12}}), 30, 1000, 100000, 0.5, 0.75, 3);
    write_file(path, full.substr(0, full.size() - 30));
    const models::PreflightResult pre = models::preflight(false);
    ASSERT_EQ(pre.errors.size(), 1u);
    EXPECT_NE(pre.errors[0].find(path), std::string::npos) << pre.errors[0];
}

TEST_F(ModelFiles, CalibrateCoversTheBatchedOperationsAndTheirRegression) {
    ScopedStarpuHome home;
    const Cli r = run_cli({"calibrate", "--ops", "batched-getrf,batched-potrf,batched-geqrf", "--batch-n", "6,12",
                           "--batch-count", "8", "--min-samples", "3", "--max-rounds", "300", "--format", "csv"},
                          // CPU workers only, so that the files hold the one architecture checked below.
                          {"STARPU_HOME=" + home.path(), "STARPU_NCPU=2", "STARPU_NCUDA=0"});
    ASSERT_TRUE(r.exited) << describe(r);
    ASSERT_EQ(r.code, 0) << describe(r);
    EXPECT_EQ(r.out.find(",UNDER"), std::string::npos) << describe(r);
    const ScopedEnvVars env({{"STARPU_HOME", home.path()}});
    for (const char* op : {"getrf", "potrf", "geqrf"}) {
        const std::string symbol = fmt::format("starfact_batched_{}_d", op);
        const std::string path = models::model_path(symbol);
        ASSERT_TRUE(fs::exists(path)) << path;
        models::ModelFile m;
        ASSERT_NO_THROW(m = models::parse_model_file(path)) << path;
        ASSERT_EQ(m.archs.size(), 1u) << path;
        const models::ArchModel& cpu = m.archs[0];
        EXPECT_EQ(cpu.arch, "cpu");
        // Two orders x slices of 1, 2 and 8 matrices: six footprints, six sizes (flops).
        std::set<unsigned long> sizes;
        for (const models::Entry& e : cpu.entries)
            if (e.nsample >= 3) sizes.insert(e.size);
        EXPECT_EQ(sizes.size(), 6u) << path;
        // StarPU's regression saw every kept sample, over the whole range of sizes.
        EXPECT_GE(cpu.regression.nsample, 18u) << path;
        ASSERT_FALSE(sizes.empty());
        EXPECT_LE(cpu.regression.minx, *sizes.begin()) << path;
        EXPECT_GE(cpu.regression.maxx, *sizes.rbegin()) << path;
        EXPECT_NE(r.out.find(symbol + ",cpu,"), std::string::npos) << describe(r);
        // One line for its regression: the curve, or why StarPU does not use it.
        EXPECT_NE(r.err.find(fmt::format("regression {} cpu: ", symbol)), std::string::npos) << describe(r);
        // Whether StarPU 1.3's fit of a*size^b+c gives a usable curve depends on the measured
        // times (it can come out NaN or overflow on noisy samples: docs/perfmodels.md), so the
        // curve's values are not asserted here; the planted-curve test checks how it is used.
    }
    EXPECT_TRUE(models::preflight(true).ok());
    // `info` counts the batched models with the tile ones.
    const Cli info = run_cli({"info"}, {"STARPU_HOME=" + home.path()});
    ASSERT_EQ(info.code, 0) << describe(info);
    EXPECT_NE(info.out.find("models: 3 of 56 present"), std::string::npos) << describe(info);
    EXPECT_NE(info.out.find("(32 tile, 12 batched, 12 variable-size batched)"), std::string::npos) << describe(info);
}

// The variable-size codelets are calibrated too: batches of orders drawn in [1, N], the same
// orders every round. Their slices' footprints are exact flop counts and many of those tasks take
// microseconds, whose history StarPU resets when a sample strays (STARPU_HISTORY_MAX_ERROR), so
// what is asserted is the regression each model gets over slices whose flops span the batch:
// that is what predicts the batches never run.
TEST_F(ModelFiles, CalibrateCoversTheVariableSizeOperations) {
    ScopedStarpuHome home;
    const Cli r = run_cli({"calibrate", "--ops", "vbatched-getrf,vbatched-potrs,vbatched-gels", "--batch-n", "40",
                           "--batch-count", "8", "--min-samples", "3", "--max-rounds", "12", "--format", "csv"},
                          {"STARPU_HOME=" + home.path(), "STARPU_NCPU=2", "STARPU_NCUDA=0"});
    ASSERT_TRUE(r.exited) << describe(r);
    EXPECT_LT(r.code, 100) << describe(r);  // the count of footprints under the minimum, not a crash
    const ScopedEnvVars env({{"STARPU_HOME", home.path()}});
    // potrs factors first: the factorization's model is written as well.
    for (const char* op : {"getrf", "potrf", "potrs", "gels"}) {
        const std::string symbol = fmt::format("starfact_vbatched_{}_d", op);
        const std::string path = models::model_path(symbol);
        ASSERT_TRUE(fs::exists(path)) << path;
        models::ModelFile m;
        ASSERT_NO_THROW(m = models::parse_model_file(path)) << path;
        ASSERT_EQ(m.archs.size(), 1u) << path;
        EXPECT_EQ(m.archs[0].arch, "cpu");
        // Slices of 1, 2 (4 slices) and 8 matrices, 13 tasks a round for at least 3 rounds; StarPU's
        // regression leaves some samples out (30 of 39 on the GPU machine's CPU workers), so at
        // least a round's worth, their flops over more than a factor of 8.
        const models::Regression& g = m.archs[0].regression;
        EXPECT_GE(g.nsample, 13u) << path;
        EXPECT_GE(g.maxx, 8 * g.minx) << path;
        EXPECT_GT(m.archs[0].entries.size(), 4u) << path;
        EXPECT_NE(r.out.find(symbol + ",cpu,"), std::string::npos) << describe(r);
        EXPECT_NE(r.err.find(fmt::format("regression {} cpu: ", symbol)), std::string::npos) << describe(r);
    }
}

// Calibrating batches of `count` matrices also runs the default slicing of a run of count matrices
// on the same workers (two slices per worker), so such a run finds history for its footprints.
TEST_F(ModelFiles, CalibrateRunsTheDefaultSlicingOfItsBatchCount) {
    ScopedStarpuHome home;
    // 3 CPU workers: 6 default slices of 4 matrices, next to slices of 1, 6 (4 slices) and 24.
    const Cli r = run_cli({"calibrate", "--ops", "batched-potrf", "--batch-n", "6", "--batch-count", "24",
                           "--min-samples", "3", "--max-rounds", "300", "--format", "csv"},
                          {"STARPU_HOME=" + home.path(), "STARPU_NCPU=3", "STARPU_NCUDA=0"});
    ASSERT_TRUE(r.exited) << describe(r);
    ASSERT_EQ(r.code, 0) << describe(r);
    const ScopedEnvVars env({{"STARPU_HOME", home.path()}});
    const std::string path = models::model_path("starfact_batched_potrf_d");
    models::ModelFile m;
    ASSERT_NO_THROW(m = models::parse_model_file(path)) << path;
    ASSERT_EQ(m.archs.size(), 1u) << path;
    std::set<unsigned long> sizes;
    for (const models::Entry& e : m.archs[0].entries)
        if (e.nsample >= 3) sizes.insert(e.size);
    ASSERT_EQ(sizes.size(), 4u) << path;
    // The sizes are flops, proportional to the matrices per slice: 1, 4, 6 and 24 times the least.
    const unsigned long one = *sizes.begin();
    EXPECT_EQ(sizes, (std::set<unsigned long>{one, 4 * one, 6 * one, 24 * one})) << path;
}

// A slice size never run is predicted by the model's curve: with a planted fitted regression
// and no history, the scheduler places every batched task with a prediction; with an empty
// home, the first tasks of each footprint go without one.
TEST_F(ModelFiles, BatchedSlicesOfUnseenSizesArePredictedByTheRegression) {
    auto fallbacks = [](const std::string& home) {
        const Cli r = run_cli({"calibrate", "--ops", "batched-getrf", "--batch-n", "8", "--batch-count", "8",
                               "--max-rounds", "1", "--format", "csv"},
                              {"STARPU_HOME=" + home, "STARPU_HOSTNAME=plantedhost", "STARPU_NCPU=2"});
        EXPECT_TRUE(r.exited) << describe(r);
        int tasks = 0, fallback = 0;
        std::istringstream in(r.out);
        for (std::string line; std::getline(in, line);) {
            if (line.rfind("starfact_batched_getrf_d,cpu,", 0) != 0) continue;
            std::vector<std::string> c;
            std::stringstream cells(line);
            for (std::string x; std::getline(cells, x, ',');) c.push_back(x);
            EXPECT_EQ(c.size(), 12u) << line;
            if (c.size() != 12u) continue;
            tasks += std::stoi(c[9]);
            fallback += std::stoi(c[10]);
        }
        EXPECT_GT(tasks, 0) << describe(r);
        return fallback;
    };
    PlantedHome planted;
    write_file(planted.model("starfact_batched_getrf_d"),
               with_regression(model_text({}), 100, 10, 10000000, 0.01, 1.0, 2.0));
    EXPECT_EQ(fallbacks(planted.path()), 0);
    ScopedStarpuHome empty;
    EXPECT_GT(fallbacks(empty.path()), 0);
}

// ---- the scheduler study ------------------------------------------------------------------

TEST_F(ModelFiles, SchedStudyRunsEverySchedulerWithAndWithoutModels) {
    ScopedStarpuHome home;
    const int t = 4, nb = 32;
    const Cli r = run_cli({"sched-study", "--op", "potrf", "-n", std::to_string(t * nb), "--nb", std::to_string(nb),
                           "--scheds", "dmda,eager", "--niter", "1", "--format", "csv", "--seed",
                           std::to_string(seed() | 1)},
                          {"STARPU_HOME=" + home.path()});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    const int tasks = t + 2 * (t * (t - 1) / 2) + t * (t - 1) * (t - 2) / 6;
    int rows = 0;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("calibrated,", 0) != 0 && line.rfind("none,", 0) != 0) continue;
        ++rows;
        std::vector<std::string> c;
        std::stringstream s(line);
        for (std::string cell; std::getline(s, cell, ',');) c.push_back(cell);
        ASSERT_EQ(c.size(), 13u) << line;
        EXPECT_EQ(c[10], std::to_string(tasks)) << line;
        if (c[1] == "eager") {
            EXPECT_EQ(c[11], c[10]) << "eager predicts nothing: " << line;
        }
        if (c[0] == "none" && c[1] == "dmda") {
            EXPECT_NE(c[11], "0") << "no model, yet every task predicted: " << line;
        }
        EXPECT_EQ(c[12], "ok") << line;
    }
    EXPECT_EQ(rows, 4) << describe(r);
    const Cli bad = run_cli({"sched-study", "--op", "potrf", "-n", "64", "--scheds", "dmda,nosuchsched"});
    EXPECT_EQ(bad.code, 2) << describe(bad);
    EXPECT_NE(bad.err.find("nosuchsched"), std::string::npos) << describe(bad);
    const Cli stat = run_cli({"sched-study", "--op", "potrf", "-n", "64", "--scheds", "static-rl"});
    EXPECT_EQ(stat.code, 2) << describe(stat);
}

// ---- traces --------------------------------------------------------------------------------

/// The tasks tile Cholesky ('L') must run on t x t tiles: "name tiles" for each.
std::multiset<std::string> cholesky_tasks(int t) {
    std::multiset<std::string> s;
    for (int k = 0; k < t; ++k) {
        s.insert(fmt::format("potrf_d {}:{} -", k, k));
        for (int i = k + 1; i < t; ++i) s.insert(fmt::format("trsm_d {}:{} {}:{}", k, k, i, k));
        for (int j = k + 1; j < t; ++j) {
            s.insert(fmt::format("syrk_d {}:{} {}:{}", j, k, j, j));
            for (int i = j + 1; i < t; ++i) s.insert(fmt::format("gemm_d {}:{} {}:{} {}:{}", i, k, j, k, i, j));
        }
    }
    return s;
}

class Traces : public RuntimeTest {};

TEST_F(Traces, LibraryTraceListsEveryTaskWithItsTiles) {
    std::mt19937_64 rng(seed());
    const int nb = 16 + static_cast<int>(rng() % 16), t = 4;
    const int n = t * nb - static_cast<int>(rng() % (nb - 1));  // an edge tile too
    std::vector<double> A(static_cast<std::size_t>(n) * n);
    matgen::spd(n, seed(), A.data(), n);
    TileMatrix<double> tA(n, n, nb);
    tA.from_lapack(A.data(), n);
    codelets::label_tiles(tA);
    codelets::start_trace();
    ASSERT_EQ(potrf('L', tA), 0);
    const auto records = codelets::stop_trace();
    std::multiset<std::string> got;
    for (const auto& r : records) {
        std::string tiles;
        for (const auto& c : r.tiles) tiles += " " + (c[0] < 0 ? std::string("-") : fmt::format("{}:{}", c[0], c[1]));
        got.insert(r.name + tiles);
        EXPECT_EQ(r.model, "starfact_" + r.name);
        EXPECT_TRUE(r.arch == "cpu" || r.arch.rfind("cuda", 0) == 0) << r.arch;  // GPU machines: cuda<dev>
        EXPECT_GE(r.end_s, r.start_s);
        EXPECT_GE(r.start_s, 0.0);
    }
    EXPECT_EQ(got, cholesky_tasks(t));
}

TEST_F(Traces, CommandLineTraceListsEveryTaskOfEachIteration) {
    TempDir dir("starfact-trace-");
    const std::string file = dir.path() + "/trace.csv";
    std::mt19937_64 rng(seed());
    const int t = 3 + static_cast<int>(rng() % 3), nb = 24;
    const Cli r = run_cli({"potrf", "-n", std::to_string(t * nb), "--nb", std::to_string(nb), "--niter", "2", "--trace",
                           file, "--seed", std::to_string(seed() | 1)});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    const auto rows = read_csv(file);
    const auto expected = cholesky_tasks(t);
    for (const char* iter : {"1", "2"}) {
        std::multiset<std::string> got;
        for (const auto& row : rows) {
            EXPECT_EQ(row.count("__bad"), 0u) << row.at("__bad");
            if (row.at("iter") != iter) continue;
            got.insert(row.at("task") + " " + row.at("tiles"));
            EXPECT_TRUE(row.at("arch") == "cpu" || row.at("arch").rfind("cuda", 0) == 0) << row.at("arch");
            EXPECT_LE(std::stod(row.at("start_s")), std::stod(row.at("end_s")));
        }
        EXPECT_EQ(got, expected) << "iteration " << iter;
    }
}

TEST_F(Traces, LuAndQrTracesHaveTheKnownTaskCounts) {
    TempDir dir("starfact-trace-");
    const int t = 3, nb = 20;
    // LU: GETRF t, LACPY t-1, GESSM and TSTRF t(t-1)/2 each, SSSSM sum (t-k-1)^2; QR alike.
    const int pairs = t * (t - 1) / 2, updates = (t - 1) * t * (2 * t - 1) / 6;
    for (const auto& [op, kinds] : std::vector<std::pair<std::string, std::vector<std::string>>>{
             {"getrf", {"getrf_d", "lacpy_d", "gessm_d", "tstrf_d", "ssssm_d"}},
             {"geqrf", {"geqrt_d", "lacpy_d", "unmqr_d", "tsqrt_d", "tsmqr_d"}}}) {
        const std::string file = dir.path() + "/" + op + ".csv";
        const Cli r = run_cli({op, "-n", std::to_string(t * nb), "--nb", std::to_string(nb), "--trace", file});
        ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
        std::map<std::string, int> count;
        for (const auto& row : read_csv(file)) ++count[row.at("task")];
        EXPECT_EQ(count[kinds[0]], t) << op;
        EXPECT_EQ(count[kinds[1]], t - 1) << op;
        EXPECT_EQ(count[kinds[2]], pairs) << op;
        EXPECT_EQ(count[kinds[3]], pairs) << op;
        EXPECT_EQ(count[kinds[4]], updates) << op;
        EXPECT_EQ(count.size(), 5u) << op;
    }
}

TEST_F(Traces, BatchedTraceListsEverySliceOfEachIteration) {
    TempDir dir("starfact-trace-");
    const std::string file = dir.path() + "/batched.csv";
    std::mt19937_64 rng(seed());
    const int slices = 2 + static_cast<int>(rng() % 4);
    const Cli r = run_cli({"batched", "--op", "potrf", "--count", "40", "-n", "6", "--slices", std::to_string(slices),
                           "--niter", "2", "--trace", file, "--seed", std::to_string(seed() | 1)});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    std::map<std::string, int> per_iter;
    for (const auto& row : read_csv(file)) {
        EXPECT_EQ(row.count("__bad"), 0u) << row.at("__bad");
        EXPECT_EQ(row.at("task").rfind("batched_potrf", 0), 0u) << row.at("task");
        EXPECT_TRUE(row.at("arch") == "cpu" || row.at("arch").rfind("cuda", 0) == 0) << row.at("arch");
        EXPECT_LE(std::stod(row.at("start_s")), std::stod(row.at("end_s")));
        ++per_iter[row.at("iter")];
    }
    EXPECT_EQ(per_iter, (std::map<std::string, int>{{"1", slices}, {"2", slices}}));
    // --sizes: the variable-size codelet's slices, one line each per iteration.
    const std::string vfile = dir.path() + "/vbatched.csv";
    const Cli v = run_cli({"batched", "--op", "getrf", "--sizes", "uniform:12", "--count", "30", "--slices",
                           std::to_string(slices), "--niter", "2", "--trace", vfile, "--seed", std::to_string(seed() | 1)});
    ASSERT_TRUE(v.exited && v.code == 0) << describe(v);
    std::map<std::string, int> viter;
    for (const auto& row : read_csv(vfile)) {
        EXPECT_EQ(row.count("__bad"), 0u) << row.at("__bad");
        EXPECT_EQ(row.at("task").rfind("vbatched_getrf", 0), 0u) << row.at("task");
        EXPECT_LE(std::stod(row.at("start_s")), std::stod(row.at("end_s")));
        ++viter[row.at("iter")];
    }
    // Slices end where the flops cross s / slices of the total: a large matrix may merge two.
    ASSERT_EQ(viter.size(), 2u);
    EXPECT_EQ(viter["1"], viter["2"]);
    EXPECT_GE(viter["1"], 1);
    EXPECT_LE(viter["1"], slices);
}

TEST_F(Traces, UnwritableTracePathIsAUsageError) {
    const Cli r = run_cli({"potrf", "-n", "64", "--nb", "32", "--trace", "/proc/self/no/such/trace.csv"});
    ASSERT_TRUE(r.exited) << describe(r);
    EXPECT_EQ(r.code, 2) << describe(r);
    EXPECT_NE(r.err.find("--trace"), std::string::npos) << describe(r);
    EXPECT_EQ(r.out, "") << describe(r);
}

}  // namespace
}  // namespace starfact::test
