// Faults (docs/testing.md, "Faults") that the command line must survive: no worker at all (a
// clear error and a nonzero exit from every subcommand, never a signal), no visible GPU (the CPU
// path, checked), and SIGINT or SIGKILL in the middle of a run that writes a result file (no file
// is left under the result's name, and the next run in the same STARPU_HOME with the same paths
// works). The GPU-side faults (STARPU_LIMIT_CUDA_MEM far below the matrix) are in
// scripts/gpu_faults.sh.
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "common/checks.hpp"
#include "io/io.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

/// The result records of a JSON-lines output.
std::vector<nlohmann::json> results_of(const std::string& out) {
    std::vector<nlohmann::json> rows;
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.empty() || line[0] != '{') continue;
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_discarded() && j.value("record", "") == "result") rows.push_back(j);
    }
    return rows;
}

class Faults : public SeededTest {};

// STARPU_NCPU=0 STARPU_NCUDA=0: StarPU has nothing to run tasks on. Every subcommand that starts
// the runtime says so and exits with a nonzero code (not by a signal, not by hanging) and prints no
// result.
TEST_F(Faults, NoWorkerAtAllIsAClearErrorFromEverySubcommand) {
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"info"},
             {"potrf", "-n", "64", "--nb", "16"},
             {"posv", "-n", "64", "--nb", "16"},
             {"getrf", "-n", "64", "--nb", "16"},
             {"gesv", "-n", "64", "--nb", "16"},
             {"geqrf", "-m", "80", "-n", "64", "--nb", "16"},
             {"gels", "-m", "80", "-n", "64", "--nb", "16"},
             {"accuracy", "--orders", "32", "--tiles", "2"}}) {
        SCOPED_TRACE(cli::command_line(args));
        std::vector<std::string> a = args;
        a.insert(a.end(), {"--format", "json"});
        const cli::Result r = cli::run(a, {"STARPU_NCPU=0", "STARPU_NCUDA=0"}, "", 60s);
        ASSERT_TRUE(r.exited) << "ended by a signal instead of reporting the error\n" << r.describe();
        EXPECT_NE(r.code, 0) << r.describe();
        EXPECT_NE(r.err.find("no worker"), std::string::npos) << r.describe();
        EXPECT_TRUE(results_of(r.out).empty()) << r.describe();
    }
}

// No GPU visible (CUDA_VISIBLE_DEVICES empty), or STARPU_NCUDA=0: the CPU path, with every check
// passing. On a machine without a GPU this is the ordinary path; on the GPU machine it is the
// fallback.
TEST_F(Faults, NoVisibleGpuGivesTheCheckedCpuPath) {
    for (const char* env : {"CUDA_VISIBLE_DEVICES=", "STARPU_NCUDA=0"})
        for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
                 {"potrf", "-n", "150", "--nb", "32"},
                 {"posv", "-n", "150", "--nb", "32", "--nrhs", "2"},
                 {"getrf", "-m", "170", "-n", "150", "--nb", "32"},
                 {"gesv", "-n", "150", "--nb", "32"},
                 {"geqrf", "-m", "170", "-n", "150", "--nb", "32"},
                 {"gels", "-m", "170", "-n", "150", "--nb", "32"}}) {
            SCOPED_TRACE(std::string(env) + " " + cli::command_line(args));
            std::vector<std::string> a = args;
            a.insert(a.end(), {"--check", "--format", "json", "--seed", std::to_string(seed() | 1)});
            const cli::Result r = cli::run(a, {env});
            ASSERT_TRUE(r.exited && r.code == 0) << r.describe();
            const auto rows = results_of(r.out);
            ASSERT_EQ(rows.size(), 1u) << r.describe();
            EXPECT_EQ(rows[0].value("ncuda", -1), 0) << rows[0].dump();
            EXPECT_GE(rows[0].value("ncpu", 0), 1) << rows[0].dump();
            EXPECT_EQ(rows[0].value("status", ""), "ok") << rows[0].dump();
        }
}

/// Starts `args`, waits for its first result row (the run is then in the middle of its work),
/// sends `sig`, and returns the result. The child must end (by the signal or by exiting nonzero).
cli::Result interrupt(const std::vector<std::string>& args, int sig, const std::string& home) {
    cli::Process p(args, {}, home);
    const bool started = p.wait_for_stdout("\"record\":\"result\"", 240s);
    p.signal(sig);
    cli::Result r = p.finish(60s);
    EXPECT_TRUE(started) << "no result row before the signal\n" << r.describe();
    EXPECT_FALSE(r.timed_out) << "the run did not end after the signal\n" << r.describe();
    EXPECT_FALSE(r.exited && r.code == 0) << "the interrupted run claims success\n" << r.describe();
    return r;
}

/// Whether a file of dir other than `keep` starts with "." + name (AtomicFile's temporary) or is
/// name + ".partial".
std::vector<std::string> leftovers(const std::string& dir, const std::string& name) {
    std::vector<std::string> found;
    for (const std::string& f : cli::files_under(dir))
        if (f.rfind("." + name, 0) == 0 || f == name + ".partial") found.push_back(f);
    return found;
}

// gesv --X: X is written once, after the last iteration, through a temporary file renamed into
// place. Interrupted in the middle, no X exists; the next run (same home, same path) writes a
// complete X that solves the system.
TEST_F(Faults, InterruptedSolveLeavesNoSolutionAndTheNextRunWorks) {
    for (int sig : {SIGINT, SIGKILL}) {
        SCOPED_TRACE(sig == SIGINT ? "SIGINT" : "SIGKILL");
        ScopedStarpuHome home;
        TempDir dir("starfact-faults-");
        const std::string x = dir.path() + "/X.npy";
        const cli::Result r = interrupt({"gesv", "-n", "600", "--nb", "100", "--niter", "200", "--X", x, "--format",
                                         "json", "--seed", std::to_string(seed() | 1)},
                                        sig, home.path());
        EXPECT_FALSE(fs::exists(x)) << "a solution file exists after the interrupted run";
        EXPECT_TRUE(leftovers(dir.path(), "X.npy").empty()) << "a temporary file was left";

        const int n = 120;
        const HostMatrix<double> A = random_matrix<double>(n, n, n, seed());
        const HostMatrix<double> B = random_matrix<double>(n, 2, n, seed() + 1);
        io::write_npy(dir.path() + "/A.npy", n, n, A.ptr(), A.ld);
        io::write_npy(dir.path() + "/B.npy", n, 2, B.ptr(), B.ld);
        const cli::Result next = cli::run({"gesv", "--A", dir.path() + "/A.npy", "--B", dir.path() + "/B.npy", "--X",
                                           x, "--nb", "32", "--check"},
                                          {}, home.path());
        ASSERT_TRUE(next.exited && next.code == 0) << next.describe();
        const io::Dense<double> X = io::read_npy<double>(x);
        ASSERT_EQ(X.m, n);
        ASSERT_EQ(X.n, 2);
        EXPECT_LT(checks::solve_residual<double>(n, 2, A.ptr(), A.ld, X.data.data(), n, B.ptr(), B.ld), 30.0);
    }
}

// accuracy --csv: the study is written to FILE.partial and renamed when complete. Interrupted, FILE
// does not exist (a leftover FILE.partial is not a result: its name says so); the next run with the
// same path completes and leaves FILE only.
TEST_F(Faults, InterruptedStudyLeavesNoResultFileAndTheNextRunWorks) {
    for (int sig : {SIGINT, SIGKILL}) {
        SCOPED_TRACE(sig == SIGINT ? "SIGINT" : "SIGKILL");
        ScopedStarpuHome home;
        TempDir dir("starfact-faults-");
        const std::string csv = dir.path() + "/acc.csv";
        const cli::Result r = interrupt({"accuracy", "--orders", "200", "--tiles", "1,2,4,8", "--matrices", "200",
                                         "--refine", "1", "--csv", csv, "--format", "json", "--seed",
                                         std::to_string(seed() | 1)},
                                        sig, home.path());
        EXPECT_FALSE(fs::exists(csv)) << "the result file exists after the interrupted run";

        const cli::Result next =
            cli::run({"accuracy", "--orders", "40", "--tiles", "1,2", "--refine", "1", "--csv", csv}, {}, home.path());
        ASSERT_TRUE(next.exited && next.code == 0) << next.describe();
        EXPECT_TRUE(leftovers(dir.path(), "acc.csv").empty()) << "the next run did not replace the partial file";
        std::istringstream lines(cli::slurp(csv));
        std::string line;
        int rows = 0;
        while (std::getline(lines, line))
            if (!line.empty() && line[0] != '#' && line.rfind("N,", 0) != 0) ++rows;
        EXPECT_EQ(rows, 2) << "one row per tile count\n" << cli::slurp(csv);
    }
}

}  // namespace
}  // namespace starfact::test
