// Bad input to every subcommand of the command line (docs/testing.md, "The command line and
// files"): an unknown option, a missing or malformed value, n < 0, nb < 0, sizes beyond
// the host memory of any machine, an output path that cannot be written. Each must exit with
// code 2, name the option and the value on stderr, print nothing on stdout, leave STARPU_HOME
// untouched (StarPU never started), and leave the output directory as it was: an existing output
// file keeps its bytes and no temporary or partial file is left.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "io/io.hpp"
#include "test_support.hpp"

namespace starfact::test {
namespace {
namespace fs = std::filesystem;

struct Case {
    std::vector<std::string> args;
    std::vector<std::string> named;  ///< what stderr must mention (the option, the value)
};

class CliErrors : public SeededTest {
protected:
    static constexpr std::size_t kBatch = 4;

    /// Runs every case and checks the usage-error contract. `watched`: a directory whose files
    /// (names and bytes) must be the same afterwards.
    void expect_usage_errors(const std::vector<Case>& cases, const std::string& watched = "") {
        std::vector<std::string> before;
        std::vector<std::string> bytes;
        if (!watched.empty()) {
            before = cli::files_under(watched);
            for (const auto& f : before) bytes.push_back(cli::slurp(watched + "/" + f));
        }
        // Usage errors end in milliseconds: run a batch of them at once (the machine may be slow).
        std::vector<cli::Result> results;
        for (std::size_t first = 0; first < cases.size(); first += kBatch) {
            const std::size_t last = std::min(cases.size(), first + kBatch);
            std::vector<std::unique_ptr<cli::Process>> batch;
            for (std::size_t i = first; i < last; ++i) batch.push_back(std::make_unique<cli::Process>(cases[i].args));
            for (auto& p : batch) results.push_back(p->finish());
            while (!batch.empty()) batch.pop_back();  // the homes go in reverse order: STARPU_HOME is restored
        }
        for (std::size_t i = 0; i < cases.size(); ++i) {
            const Case& c = cases[i];
            const cli::Result& r = results[i];
            SCOPED_TRACE(cli::command_line(c.args));
            EXPECT_TRUE(r.exited) << r.describe();
            EXPECT_EQ(r.code, 2) << r.describe();
            for (const std::string& word : c.named)
                EXPECT_NE(r.err.find(word), std::string::npos) << "stderr does not name '" << word << "'\n"
                                                               << r.describe();
            EXPECT_EQ(r.out, "") << "something was printed on stdout: the command started";
            EXPECT_TRUE(r.home_untouched) << "StarPU wrote into STARPU_HOME: the runtime started";
        }
        if (!watched.empty()) {
            EXPECT_EQ(cli::files_under(watched), before) << "a file appeared or vanished in " << watched;
            for (std::size_t f = 0; f < before.size(); ++f)
                EXPECT_EQ(cli::slurp(watched + "/" + before[f]), bytes[f]) << before[f] << " changed";
        }
    }
};

// Every factorization subcommand takes -n, --nb, --prec, --niter, --seed, --format (one shared
// declaration, drivers/session.cc): every bad value of each on potrf, and the TESTING.md categories
// (unknown option, missing and malformed values, n < 0, nb < 0, n^2 beyond host memory, a stray
// argument) on every other subcommand. Process start-up costs about 0.3 s here, hence not the
// full list everywhere.
TEST_F(CliErrors, CommonOptionsOfEveryFactorizationSubcommand) {
    std::vector<Case> cases = {
        {{"potrf", "--bogus=3"}, {"--bogus"}},
        {{"potrf", "-n", "1.5"}, {"-n", "1.5"}},
        {{"potrf", "-n", "12x"}, {"-n", "12x"}},
        {{"potrf", "-n", "99999999999"}, {"-n", "99999999999"}},
        {{"potrf", "--nb", "x"}, {"--nb", "x"}},
        {{"potrf", "--nb"}, {"--nb"}},
        {{"potrf", "--prec", "q"}, {"--prec", "q"}},
        {{"potrf", "--prec"}, {"--prec"}},
        {{"potrf", "--niter", "0"}, {"--niter", "0"}},
        {{"potrf", "--niter", "-2"}, {"--niter", "-2"}},
        {{"potrf", "--seed", "abc"}, {"--seed", "abc"}},
        {{"potrf", "--format"}, {"--format"}},
        {{"potrf", "--A"}, {"--A"}},
    };
    for (const std::string cmd : {"potrf", "posv", "getrf", "gesv", "geqrf", "gels"}) {
        const std::vector<Case> per = {
            {{cmd, "--bogus"}, {"--bogus"}},
            {{cmd, "-n"}, {"-n"}},
            {{cmd, "-n", "abc"}, {"-n", "abc"}},
            {{cmd, "-n", "-5"}, {"-n", "-5"}},
            // 4e12 elements: beyond the host memory of any machine (2^31 elements are no limit).
            {{cmd, "-n", "2000000"}, {"-n", "2000000"}},
            {{cmd, "--nb", "-1"}, {"--nb", "-1"}},
            {{cmd, "--seed", "-1"}, {"--seed", "-1"}},
            {{cmd, "--format", "xml"}, {"--format", "xml"}},
            {{cmd, "17"}, {"17"}},
            {{cmd, "--A", "/nonexistent/A.npy"}, {"--A", "/nonexistent/A.npy"}},
        };
        cases.insert(cases.end(), per.begin(), per.end());
    }
    expect_usage_errors(cases);
}

// The options of some subcommands only: --uplo (Cholesky), -m, --ib, --schedule, --trtri (LU),
// -m, --ib (QR), --nrhs, --B, --X (solves).
TEST_F(CliErrors, OptionsOfSomeSubcommands) {
    std::vector<Case> cases = {
        {{"potrf", "--uplo", "X"}, {"--uplo", "X"}},
        {{"posv", "--uplo", "lower"}, {"--uplo", "lower"}},
        {{"potrf", "--uplo"}, {"--uplo"}},
        {{"potrf", "--nrhs", "2"}, {"--nrhs"}},
        {{"potrf", "--ib", "4"}, {"--ib"}},
        {{"potrf", "--B", "B.npy"}, {"--B"}},
        {{"getrf", "--schedule", "static"}, {"--schedule", "static"}},
        {{"gesv", "--schedule"}, {"--schedule"}},
        {{"getrf", "--trtri", "maybe"}, {"--trtri", "maybe"}},
        {{"getrf", "--nrhs", "2"}, {"--nrhs"}},
        {{"gesv", "-m", "10"}, {"-m"}},
        {{"geqrf", "--schedule", "dynamic"}, {"--schedule"}},
        {{"posv", "--nrhs", "-1"}, {"--nrhs", "-1"}},
        {{"gesv", "--nrhs", "abc"}, {"--nrhs", "abc"}},
        {{"gels", "--nrhs", "2.5"}, {"--nrhs", "2.5"}},
        {{"posv", "-n", "1000", "--nrhs", "3000000"}, {"--nrhs", "3000000"}},
        {{"gesv", "-n", "1000", "--nrhs", "3000000"}, {"--nrhs", "3000000"}},
        {{"gels", "-n", "1000", "--nrhs", "3000000"}, {"--nrhs", "3000000"}},
        {{"posv", "--B", "/nonexistent/B.npy"}, {"--B", "/nonexistent/B.npy"}},
        {{"gels", "--B"}, {"--B"}},
        {{"gesv", "--X"}, {"--X"}},
    };
    for (const std::string cmd : {"getrf", "geqrf", "gels"}) {
        const std::vector<Case> per = {
            {{cmd, "-m", "-2"}, {"-m", "-2"}},
            {{cmd, "-m", "abc"}, {"-m", "abc"}},
            {{cmd, "-m", "5", "-n", "10"}, {"-m", "5"}},
            {{cmd, "-m", "30000000", "-n", "1000"}, {"30000000"}},
            {{cmd, "--ib", "-1"}, {"--ib", "-1"}},
            {{cmd, "--ib", "x"}, {"--ib", "x"}},
        };
        cases.insert(cases.end(), per.begin(), per.end());
    }
    cases.push_back({{"gesv", "--ib", "-4"}, {"--ib", "-4"}});
    expect_usage_errors(cases);
}

TEST_F(CliErrors, InfoAndAccuracyAndTheCommandItself) {
    expect_usage_errors({
        {{"info", "--bogus"}, {"--bogus"}},
        {{"info", "--format", "csv"}, {"--format", "csv"}},
        {{"info", "--format"}, {"--format"}},
        {{"info", "-n", "10"}, {"-n"}},
        {{"accuracy", "--bogus"}, {"--bogus"}},
        {{"accuracy", "--orders", "-5"}, {"--orders", "-5"}},
        {{"accuracy", "--orders", "abc"}, {"--orders", "abc"}},
        {{"accuracy", "--orders"}, {"--orders"}},
        {{"accuracy", "--orders", "2000000"}, {"--orders", "2000000"}},
        {{"accuracy", "--tiles", "-1"}, {"--tiles", "-1"}},
        {{"accuracy", "--refine", "x"}, {"--refine", "x"}},
        {{"accuracy", "--refine", "99"}, {"--refine", "99"}},
        {{"accuracy", "--ib", "-1"}, {"--ib", "-1"}},
        {{"accuracy", "--seed", "abc"}, {"--seed", "abc"}},
        {{"accuracy", "--seed", "-1"}, {"--seed", "-1"}},
        // The other subcommands' seeds (their own suites test the rest of their options).
        {{"batched", "--seed", "-1"}, {"--seed", "-1"}},
        {{"sched-study", "--seed", "-7"}, {"--seed", "-7"}},
        {{"accuracy", "--matrices", "-1"}, {"--matrices", "-1"}},
        {{"accuracy", "--format", "xml"}, {"--format", "xml"}},
        {{"accuracy", "--csv"}, {"--csv"}},
        {{"--bogus"}, {"--bogus"}},
        {{"potrf", "potrf"}, {"potrf"}},
        {{"frobnicate"}, {"frobnicate"}},
    });
}

// Output paths that cannot be written: a directory that refuses new files (/proc refuses them even
// to root), a missing directory, a directory named as the file, a path through a regular file. The
// output directory keeps exactly its files: an X that was there and an input A keep their bytes.
TEST_F(CliErrors, UnwritableOutputPaths) {
    TempDir dir("starfact-cli-errors-");
    const std::string d = dir.path();
    std::ofstream(d + "/X.npy", std::ios::binary) << "previous result, must survive";
    std::ofstream(d + "/acc.csv") << "previous study\n";
    // An input file next to the outputs: it must come out byte for byte the same.
    const HostMatrix<double> A = random_matrix<double>(20, 20, 20, seed());
    io::write_npy(d + "/A.npy", 20, 20, A.ptr(), A.ld);
    std::vector<Case> cases;
    for (const std::string cmd : {"posv", "gesv", "gels"}) {
        const std::vector<Case> per = {
            {{cmd, "-n", "20", "--X", "/proc/X.npy"}, {"--X", "/proc/X.npy"}},
            {{cmd, "-n", "20", "--X", d + "/missing/X.npy"}, {"--X", "missing/X.npy"}},
            {{cmd, "-n", "20", "--X", d}, {"--X"}},
            {{cmd, "-n", "20", "--X", d + "/X.npy/Y.npy"}, {"--X", "X.npy/Y.npy"}},
            {{cmd, "-n", "20", "--X", d + "/X.txt"}, {"--X", "X.txt"}},
            // A usage error elsewhere leaves an existing X alone.
            {{cmd, "-n", "20", "--nb", "-3", "--X", d + "/X.npy"}, {"--nb", "-3"}},
        };
        cases.insert(cases.end(), per.begin(), per.end());
    }
    cases.push_back({{"gesv", "--A", d + "/A.npy", "--X", "/proc/X.npy"}, {"--X", "/proc/X.npy"}});
    cases.push_back({{"posv", "--A", d + "/A.npy", "--X", d + "/X.npy", "--nb", "-3"}, {"--nb", "-3"}});
    cases.push_back({{"accuracy", "--orders", "32", "--tiles", "2", "--csv", "/proc/acc.csv"}, {"--csv", "/proc/acc.csv"}});
    cases.push_back({{"accuracy", "--orders", "32", "--csv", d + "/acc.csv/x.csv"}, {"--csv", "acc.csv/x.csv"}});
    cases.push_back({{"accuracy", "--orders", "32", "--refine", "-1", "--csv", d + "/acc.csv"}, {"--refine", "-1"}});
    if (geteuid() != 0) {
        // Without root, a directory without write permission refuses the file too.
        fs::create_directory(d + "/ro");
        chmod((d + "/ro").c_str(), 0555);
        cases.push_back({{"gesv", "-n", "20", "--X", d + "/ro/X.npy"}, {"--X", "ro/X.npy"}});
    }
    expect_usage_errors(cases, d);
    if (fs::exists(d + "/ro")) chmod((d + "/ro").c_str(), 0755);
}

}  // namespace
}  // namespace starfact::test
