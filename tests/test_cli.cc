// The starfact command line, run as a child process (path from STARFACT_CLI_PATH), each run
// with its own STARPU_HOME: checked runs exit 0, JSON lines carry the documented keys, usage
// errors exit 2 naming the option and value with nothing started, no worker gives a clear error.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <fmt/format.h>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/blas.hpp"
#include "io/io.hpp"
#include "test_support.hpp"

#ifndef STARFACT_CLI_PATH
#error "STARFACT_CLI_PATH must name the starfact executable"
#endif

extern char** environ;

namespace starfact::test {
namespace {
namespace fs = std::filesystem;

// The starfact next to this test binary (build/bin or a GPU-machine bundle), else the
// build-time path.
std::string cli_path() {
    std::error_code ec;
    const fs::path beside = fs::read_symlink("/proc/self/exe", ec).parent_path() / "starfact";
    if (!ec && fs::exists(beside)) return beside.string();
    return STARFACT_CLI_PATH;
}

struct CliResult {
    bool exited = false;  ///< false: killed by a signal (or by the timeout)
    int code = -1;        ///< exit code when exited, else the signal
    std::string out, err;
    bool home_empty = true;  ///< whether the run left STARPU_HOME empty (StarPU never started)
};

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

/// Runs starfact with `args` and extra environment `env` ("NAME=value"), in a fresh
/// STARPU_HOME, killing it after `timeout`.
CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                  std::chrono::seconds timeout = std::chrono::seconds(120)) {
    ScopedStarpuHome home;
    TempDir io("starfact-cli-");
    // Files seeded from the bus calibration are not StarPU having started.
    std::vector<fs::path> seeded;
    for (const auto& e : fs::recursive_directory_iterator(home.path())) seeded.push_back(e.path());
    const std::string out_path = io.path() + "/stdout", err_path = io.path() + "/stderr";

    std::vector<std::string> argv_s{cli_path()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
    // The overrides replace any inherited value of the same name.
    for (const std::string& kv : env) {
        const std::string name = kv.substr(0, kv.find('=') + 1);
        env_s.erase(std::remove_if(env_s.begin(), env_s.end(),
                                   [&](const std::string& e) { return e.compare(0, name.size(), name) == 0; }),
                    env_s.end());
    }
    env_s.insert(env_s.end(), env.begin(), env.end());
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);

    const pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out_path.c_str(), "w", stdout) || !freopen(err_path.c_str(), "w", stderr)) _exit(126);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    CliResult r;
    if (pid < 0) {
        ADD_FAILURE() << "fork failed: " << std::strerror(errno);
        return r;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ADD_FAILURE() << "starfact did not finish in " << timeout.count() << " s; killed";
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    r.exited = WIFEXITED(status);
    r.code = r.exited ? WEXITSTATUS(status) : WTERMSIG(status);
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    for (const auto& e : fs::recursive_directory_iterator(home.path()))
        if (std::find(seeded.begin(), seeded.end(), e.path()) == seeded.end() && e.is_regular_file())
            r.home_empty = false;
    EXPECT_NE(r.code, 127) << "could not execute " << cli_path();
    return r;
}

std::string describe(const CliResult& r) {
    return (r.exited ? "exit code " + std::to_string(r.code) : "killed by signal " + std::to_string(r.code)) +
           "\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err;
}

class Cli : public SeededTest {};

TEST_F(Cli, PotrfCheckedRunExitsZero) {
    const CliResult r = run_cli({"potrf", "-n", "300", "--nb", "64", "--check", "--seed", std::to_string(seed() | 1)});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    EXPECT_NE(r.out.find("potrf"), std::string::npos) << describe(r);
    EXPECT_NE(r.out.find(" ok"), std::string::npos) << describe(r);
    EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << describe(r);
}

TEST_F(Cli, PotrfSinglePrecisionUpperCsvExitsZero) {
    const CliResult r = run_cli({"potrf", "-n", "150", "--nb", "32", "--prec", "s", "--uplo", "U", "--check", "--niter",
                                 "2", "--format", "csv", "--seed", std::to_string(seed() | 1)});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    EXPECT_NE(r.out.find("op,prec,uplo,n,nrhs,nb,iter,time_s,gflops,residual,info,status"), std::string::npos)
        << describe(r);
    EXPECT_NE(r.out.find("potrf,s,U,150,0,32,1,"), std::string::npos) << describe(r);
    EXPECT_NE(r.out.find(",median,"), std::string::npos) << "--niter 2 prints the median row\n" << describe(r);
}

TEST_F(Cli, PosvJsonLinesCarryEveryKey) {
    const CliResult r = run_cli({"posv", "-n", "200", "--nb", "50", "--nrhs", "3", "--check", "--format", "json",
                                 "--seed", std::to_string(seed() | 1)});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    std::istringstream lines(r.out);
    std::string line;
    int configs = 0, results = 0;
    while (std::getline(lines, line)) {
        if (line.empty()) continue;
        nlohmann::json j;
        ASSERT_NO_THROW(j = nlohmann::json::parse(line)) << "not a JSON line: " << line;
        ASSERT_TRUE(j.is_object()) << line;
        ASSERT_TRUE(j.contains("record")) << line;
        if (j["record"] == "config") {
            ++configs;
            continue;
        }
        ASSERT_EQ(j["record"], "result") << line;
        ++results;
        for (const char* key :
             {"op", "prec", "m", "n", "nb", "sched", "ncpu", "ncuda", "time_s", "gflops", "residual", "info", "status"})
            EXPECT_TRUE(j.contains(key)) << "missing key '" << key << "' in " << line;
        EXPECT_EQ(j.value("op", ""), "posv");
        EXPECT_EQ(j.value("prec", ""), "d");
        EXPECT_EQ(j.value("m", -1), 200);
        EXPECT_EQ(j.value("n", -1), 200);
        EXPECT_EQ(j.value("nb", -1), 50);
        EXPECT_EQ(j.value("nrhs", -1), 3);
        EXPECT_GE(j.value("ncpu", -1), 1);
        EXPECT_GE(j.value("ncuda", -1), 0);
        EXPECT_FALSE(j.value("sched", "").empty());
        EXPECT_GT(j.value("time_s", -1.0), 0.0);
        EXPECT_GE(j.value("gflops", -1.0), 0.0);
        EXPECT_EQ(j.value("info", -1), 0);
        EXPECT_EQ(j.value("status", ""), "ok");
        ASSERT_TRUE(j["residual"].is_number()) << line;
        EXPECT_GE(j["residual"].get<double>(), 0.0);
        EXPECT_LT(j["residual"].get<double>(), 30.0);
    }
    EXPECT_EQ(configs, 1) << describe(r);
    EXPECT_EQ(results, 1) << describe(r);
}

TEST_F(Cli, GetrfSquareAndTallCheckedRunsExitZero) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"getrf", "-n", "200", "--nb", "48", "--ib", "8", "--check"},
          std::vector<std::string>{"getrf", "-m", "300", "-n", "170", "--nb", "64", "--check", "--prec", "s"}}) {
        std::vector<std::string> a = args;
        a.insert(a.end(), {"--seed", std::to_string(seed() | 1)});
        const CliResult r = run_cli(a);
        ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
        EXPECT_NE(r.out.find(" ok"), std::string::npos) << describe(r);
        EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << describe(r);
    }
}

TEST_F(Cli, GesvJsonReportsLapackAndGrowth) {
    const CliResult r = run_cli({"gesv", "-n", "150", "--nb", "40", "--ib", "5", "--nrhs", "3", "--check", "--format",
                                 "json", "--seed", std::to_string(seed() | 1)});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    std::istringstream lines(r.out);
    std::string line;
    int results = 0;
    while (std::getline(lines, line)) {
        const auto j = nlohmann::json::parse(line);
        if (j["record"] != "result") continue;
        ++results;
        EXPECT_EQ(j.value("op", ""), "gesv");
        EXPECT_EQ(j.value("ib", -1), 5);
        for (const char* key : {"residual", "residual_lapack", "growth", "growth_pp"}) {
            ASSERT_TRUE(j[key].is_number()) << key << " in " << line;
            EXPECT_GT(j[key].get<double>(), 0.0) << key;
        }
        EXPECT_LT(j["residual"].get<double>(), 30.0);
        EXPECT_GE(j["growth"].get<double>(), 1.0 - 1e-12) << "max|U| >= max|A| for the first pivot row";
    }
    EXPECT_EQ(results, 1) << describe(r);
}

TEST_F(Cli, GetrfWideMatrixOrUnknownScheduleIsAUsageError) {
    for (const auto& [args, option] :
         {std::pair<std::vector<std::string>, std::string>{{"getrf", "-m", "10", "-n", "20"}, "-m"},
          {{"gesv", "-n", "20", "--schedule", "static-xx"}, "--schedule"}}) {
        const CliResult r = run_cli(args);
        ASSERT_TRUE(r.exited) << describe(r);
        EXPECT_EQ(r.code, 2) << describe(r);
        EXPECT_NE(r.err.find(option), std::string::npos) << describe(r);
        EXPECT_TRUE(r.home_empty) << "nothing may start on a usage error";
    }
}

TEST_F(Cli, NbZeroMeansAutomatic) {
    const CliResult r = run_cli({"potrf", "-n", "40", "--nb", "0", "--check", "--format", "json"});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    const auto first = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
    EXPECT_GT(first.value("nb", 0), 0) << "the automatic nb is reported";
}

TEST_F(Cli, InfoExitsZero) {
    const CliResult r = run_cli({"info", "--format", "json"});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')))) << describe(r);
    EXPECT_GE(j.value("ncpu", -1), 1);
    ASSERT_TRUE(j.contains("workers"));
    EXPECT_FALSE(j["workers"].empty());
    const CliResult table = run_cli({"info"});
    ASSERT_TRUE(table.exited && table.code == 0) << describe(table);
    EXPECT_NE(table.out.find("# ncpu:"), std::string::npos) << describe(table);
}

TEST_F(Cli, HelpExitsZero) {
    const CliResult r = run_cli({"potrf", "--help"});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    EXPECT_NE(r.out.find("--nb"), std::string::npos) << describe(r);
}

struct UsageCase {
    std::vector<std::string> args;
    std::vector<std::string> named;  ///< what the message must mention (option, value)
};

// An order whose matrix exceeds this machine's memory even in single precision (100000 fits
// the 128 GiB of the GPU machine).
std::string order_beyond_memory() {
    const double bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    return std::to_string(static_cast<long long>(std::ceil(std::sqrt(bytes / 4.0))) + 1);
}

TEST_F(Cli, UsageErrorsExitTwoNamingTheOptionWithNothingStarted) {
    const std::string huge = order_beyond_memory();
    const std::vector<UsageCase> cases = {
        {{"potrf", "--bogus"}, {"--bogus"}},
        {{"potrf", "-n", "-5"}, {"-n", "-5"}},
        {{"potrf", "-n", "abc"}, {"-n", "abc"}},
        {{"potrf", "--prec", "x"}, {"--prec", "x"}},
        {{"potrf", "--format", "xml"}, {"--format", "xml"}},
        {{"posv", "--format", "xml"}, {"--format", "xml"}},
        {{"potrf", "--niter", "0"}, {"--niter", "0"}},
        {{"potrf", "--uplo", "X"}, {"--uplo", "X"}},
        {{"potrf", "--nb", "-1"}, {"--nb", "-1"}},
        {{"posv", "--nrhs", "-2"}, {"--nrhs", "-2"}},
        {{"potrf", "--nb"}, {"--nb"}},
        {{"potrf", "-n", huge}, {"-n", huge}},
        {{"posv", "-n", huge, "--prec", "s"}, {"-n", huge}},
        {{"info", "--format", "csv"}, {"--format", "csv"}},
        {{}, {}},
    };
    for (const UsageCase& c : cases) {
        std::string cmdline;
        for (const auto& a : c.args) cmdline += " " + a;
        SCOPED_TRACE("starfact" + cmdline);
        const CliResult r = run_cli(c.args);
        EXPECT_TRUE(r.exited) << describe(r);
        EXPECT_EQ(r.code, 2) << describe(r);
        for (const std::string& word : c.named)
            EXPECT_NE(r.err.find(word), std::string::npos) << "the message does not name '" << word << "'\n"
                                                           << describe(r);
        EXPECT_EQ(r.out, "") << "output was printed: something started";
        EXPECT_TRUE(r.home_empty) << "StarPU wrote into STARPU_HOME: the runtime was started";
    }
}

TEST_F(Cli, UnknownSubcommandIsNamed) {
    const CliResult r = run_cli({"frobnicate", "-n", "10"});
    EXPECT_TRUE(r.exited && r.code == 2) << describe(r);
    EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << "the message does not name the command\n" << describe(r);
    EXPECT_EQ(r.out, "");
}

TEST_F(Cli, NoWorkerAtAllIsAClearError) {
    const CliResult r = run_cli({"potrf", "-n", "100", "--nb", "32"}, {"STARPU_NCPU=0", "STARPU_NCUDA=0"});
    ASSERT_TRUE(r.exited) << "starfact died of a signal instead of reporting the error\n" << describe(r);
    EXPECT_NE(r.code, 0) << describe(r);
    EXPECT_NE(r.err.find("no worker"), std::string::npos) << describe(r);
    EXPECT_EQ(r.out.find("\"record\":\"result\""), std::string::npos);
}

// ---- QR: geqrf and gels ---------------------------------------------------------------------

/// The result records of a JSON-lines run (exactly one config record expected before them).
std::vector<nlohmann::json> json_results(const CliResult& r) {
    std::vector<nlohmann::json> results;
    std::istringstream lines(r.out);
    std::string line;
    int configs = 0;
    while (std::getline(lines, line)) {
        if (line.empty()) continue;
        nlohmann::json j;
        EXPECT_NO_THROW(j = nlohmann::json::parse(line)) << "not a JSON line: " << line;
        if (j.value("record", "") == "config") ++configs;
        if (j.value("record", "") == "result") results.push_back(j);
    }
    EXPECT_EQ(configs, 1) << describe(r);
    return results;
}

TEST_F(Cli, GeqrfSquareAndTallCheckedRunsReportResidualAndOrthogonality) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"geqrf", "-n", "150", "--nb", "40", "--ib", "8"},
          std::vector<std::string>{"geqrf", "-m", "400", "-n", "90", "--nb", "32", "--prec", "s"}}) {
        std::vector<std::string> a = args;
        a.insert(a.end(), {"--check", "--format", "json", "--seed", std::to_string(seed() | 1)});
        const CliResult r = run_cli(a);
        ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
        const auto results = json_results(r);
        ASSERT_EQ(results.size(), 1u) << describe(r);
        const nlohmann::json& j = results[0];
        EXPECT_EQ(j.value("op", ""), "geqrf");
        EXPECT_EQ(j.value("m", -1), args[1] == "-m" ? 400 : 150);
        EXPECT_EQ(j.value("status", ""), "ok");
        EXPECT_EQ(j.value("info", -1), 0);
        for (const char* key : {"residual", "orthogonality"}) {
            ASSERT_TRUE(j[key].is_number()) << key << " in " << j.dump();
            EXPECT_GE(j[key].get<double>(), 0.0) << key;
            EXPECT_LT(j[key].get<double>(), 30.0) << key;
        }
        EXPECT_TRUE(j["residual_lapack"].is_null()) << j.dump();
        EXPECT_GT(j.value("gflops", -1.0), 0.0);
    }
}

TEST_F(Cli, GelsJsonReportsResidualNextToLapack) {
    // m = 100, n = 90, nb = 64: the last diagonal tile is 36 x 26, taller than wide.
    const CliResult r = run_cli({"gels", "-m", "100", "-n", "90", "--nb", "64", "--ib", "5", "--nrhs", "3", "--check",
                                 "--niter", "2", "--format", "json", "--seed", std::to_string(seed() | 1)});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    const auto results = json_results(r);
    ASSERT_EQ(results.size(), 3u) << "two runs and the median\n" << describe(r);
    const nlohmann::json& j = results[1];  // the checked (last) run
    EXPECT_EQ(j.value("op", ""), "gels");
    EXPECT_EQ(j.value("m", -1), 100);
    EXPECT_EQ(j.value("n", -1), 90);
    EXPECT_EQ(j.value("nrhs", -1), 3);
    EXPECT_EQ(j.value("ib", -1), 5);
    EXPECT_EQ(j.value("info", -1), 0);
    EXPECT_EQ(j.value("status", ""), "ok");
    for (const char* key : {"residual", "residual_lapack"}) {
        ASSERT_TRUE(j[key].is_number()) << key << " in " << j.dump();
        EXPECT_GT(j[key].get<double>(), 0.0) << key;
        EXPECT_LT(j[key].get<double>(), 30.0) << key;
    }
    EXPECT_EQ(results[2].value("iter", ""), "median");
}

TEST_F(Cli, QrUsageErrorsExitTwoNamingTheOption) {
    const std::vector<UsageCase> cases = {
        {{"geqrf", "-m", "10", "-n", "20"}, {"-m", "10"}},
        {{"gels", "-m", "5", "-n", "6"}, {"-m", "5"}},
        {{"geqrf", "--ib", "-3"}, {"--ib", "-3"}},
        {{"gels", "--nrhs", "-1"}, {"--nrhs", "-1"}},
        {{"gels", "-m", "abc"}, {"-m", "abc"}},
        {{"geqrf", "--nrhs", "2"}, {"--nrhs"}},
        {{"geqrf", "-m", "100000", "-n", "100000"}, {"-n", "100000"}},
        {{"gels", "--format", "xml"}, {"--format", "xml"}},
    };
    for (const UsageCase& c : cases) {
        std::string cmdline;
        for (const auto& a : c.args) cmdline += " " + a;
        SCOPED_TRACE("starfact" + cmdline);
        const CliResult r = run_cli(c.args);
        EXPECT_TRUE(r.exited) << describe(r);
        EXPECT_EQ(r.code, 2) << describe(r);
        for (const std::string& word : c.named)
            EXPECT_NE(r.err.find(word), std::string::npos) << "the message does not name '" << word << "'\n"
                                                           << describe(r);
        EXPECT_EQ(r.out, "") << "output was printed: something started";
        EXPECT_TRUE(r.home_empty) << "StarPU wrote into STARPU_HOME: the runtime was started";
    }
}


// The accuracy study: a small sweep writes one CSV row per (order, tiles, precision, kind) with
// every column filled; t = 1 is LAPACK's partial pivoting (ratio 1, the same swaps and growth).
std::vector<std::string> split(const std::string& line, char sep) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream in(line);
    while (std::getline(in, cell, sep)) cells.push_back(cell);
    if (!line.empty() && line.back() == sep) cells.emplace_back();
    return cells;
}

// One line of RFC 4180 CSV: fields split at commas outside quotes, quotes removed, "" read as ".
std::vector<std::string> csv_fields(const std::string& line) {
    std::vector<std::string> cells(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
            cells.back() += '"';
            ++i;
        } else if (c == '"') {
            quoted = !quoted;
        } else if (c == ',' && !quoted) {
            cells.emplace_back();
        } else {
            cells.back() += c;
        }
    }
    return cells;
}

TEST_F(Cli, AccuracySmallSweepCsvHasEveryColumnForEveryPoint) {
    TempDir dir("starfact-acc-");
    const std::string csv = dir.path() + "/acc.csv";
    const CliResult r =
        run_cli({"accuracy", "--orders", "64,101", "--tiles", "1,3,8", "--prec", "d,s", "--kind",
                 "uniform,antitriangular", "--refine", "2", "--csv", csv, "--seed", std::to_string(seed() | 1)},
                // CPU workers only: t = 1 is then LAPACK's getrf itself, so the ratio is exactly 1
                // (on a GPU, cuSOLVER's getrf rounds differently).
                {"STARPU_NCUDA=0"}, std::chrono::seconds(240));
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    EXPECT_FALSE(fs::exists(csv + ".partial")) << "the partial file is renamed into place";
    // Plain CSV: the header is the first line, no comment lines; the study's configuration and
    // command are columns after the data columns, the same in every row.
    const std::vector<std::string> config_columns = {"starpu", "sched",   "ncpu", "ncuda", "study",
                                                     "command", "date", "host", "study_seed"};
    const std::string study_seed = std::to_string(seed() | 1);
    std::map<std::string, std::string> first_config;
    std::istringstream lines(slurp(csv));
    std::string line;
    std::vector<std::string> columns;
    int rows = 0;
    std::map<std::string, int> points;
    while (std::getline(lines, line)) {
        ASSERT_FALSE(line.empty()) << "a blank line in the CSV file";
        ASSERT_NE(line[0], '#') << "a comment line in the CSV file: " << line;
        if (columns.empty()) {
            columns = csv_fields(line);
            ASSERT_FALSE(columns.empty());
            EXPECT_EQ(columns[0], "N") << "the first line is the header: " << line;
            for (const auto& c : config_columns)
                EXPECT_NE(std::find(columns.begin(), columns.end(), c), columns.end()) << "no column " << c;
            continue;
        }
        const std::vector<std::string> cells = csv_fields(line);
        ASSERT_EQ(cells.size(), columns.size()) << line;
        std::map<std::string, std::string> row;
        for (std::size_t c = 0; c < cells.size(); ++c) {
            const bool config = columns[c] == "gpus" ||
                                std::find(config_columns.begin(), config_columns.end(), columns[c]) != config_columns.end();
            if (columns[c] != "gpus") {  // empty without a GPU
                EXPECT_FALSE(cells[c].empty() || cells[c] == "-") << "column " << columns[c] << " empty in " << line;
            }
            row[columns[c]] = cells[c];
            if (config) {
                if (rows == 0) {
                    first_config[columns[c]] = cells[c];
                }
                EXPECT_EQ(cells[c], first_config[columns[c]]) << "column " << columns[c] << " differs between rows";
            }
        }
        EXPECT_EQ(row["study"], "accuracy");
        EXPECT_EQ(row["study_seed"], study_seed);
        EXPECT_EQ(row["ncuda"], "0");
        EXPECT_EQ(row["command"].rfind("starfact accuracy --orders 64,101 --tiles 1,3,8 --prec d,s", 0), 0u)
            << row["command"];
        EXPECT_NE(row["command"].find("--seed " + study_seed), std::string::npos) << row["command"];
        EXPECT_EQ(row["date"].size(), 20u) << "YYYY-MM-DDTHH:MM:SSZ: " << row["date"];
        ++rows;
        ++points[row["N"] + "/" + row["t"] + "/" + row["prec"] + "/" + row["kind"]];
        EXPECT_EQ(row["status"], "ok") << line;
        EXPECT_EQ(row["refine_steps"], "2");
        EXPECT_EQ(split(row["berr_history"], ';').size(), 3u) << "one backward error per step, and the start";
        EXPECT_GT(std::stod(row["backward_error"]), 0.0);
        EXPECT_GE(std::stod(row["growth"]), 1.0 - 1e-6);
        EXPECT_GE(std::stod(row["swaps"]), 0);
        if (row["t"] == "1") {
            EXPECT_EQ(row["nb"], row["N"]);
            EXPECT_EQ(std::stod(row["ratio"]), 1.0) << line;
            EXPECT_EQ(std::stod(row["ratio_exact"]), 1.0) << line;
            EXPECT_EQ(row["swaps"], row["swaps_pp"]) << line;
            EXPECT_EQ(row["growth"], row["growth_pp"]) << line;
        }
        if (row["kind"] == "antitriangular") {
            EXPECT_EQ(std::stod(row["growth_pp"]), 1.0) << "partial pivoting does no arithmetic on it";
        }
    }
    for (const char* name :
         {"N", "t", "nb", "prec", "kind", "ratio", "backward_error", "growth", "growth_pp", "swaps", "swaps_pp",
          "refine_steps", "ratio_after_refine", "backward_error_after_refine", "refine_time_s"})
        EXPECT_NE(std::find(columns.begin(), columns.end(), name), columns.end()) << "no column " << name;
    EXPECT_EQ(rows, 2 * 3 * 2 * 2) << "one row per (order, tiles, precision, kind)";
    EXPECT_EQ(points.size(), 24u);
    EXPECT_EQ(points.count("101/3/s/uniform"), 1u) << "t = 3 tiles of 34 rows for N = 101";
    EXPECT_NE(r.out.find("ratio"), std::string::npos) << "the table goes to the terminal";
}

TEST_F(Cli, AccuracyJsonLinesCarryEveryColumn) {
    const CliResult r = run_cli({"accuracy", "--orders", "40", "--tiles", "1,4", "--kind", "illcond,normal", "--refine",
                                 "1", "--format", "json", "--seed", std::to_string(seed() | 1)});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    std::istringstream lines(r.out);
    std::string line;
    int results = 0;
    while (std::getline(lines, line)) {
        const auto j = nlohmann::json::parse(line);
        if (j["record"] != "result") continue;
        ++results;
        for (const char* key : {"N", "t", "nb", "ib", "prec", "kind", "matrix", "seed", "ratio", "residual",
                                "residual_pp", "backward_error", "backward_error_pp", "ratio_exact", "residual_exact",
                                "residual_exact_pp", "backward_error_exact", "backward_error_exact_pp", "growth",
                                "growth_pp", "swaps",
                                "swaps_pp", "factor_time_s", "solve_time_s", "refine_steps", "ratio_after_refine",
                                "backward_error_after_refine", "refine_time_s", "ratio_after_refine_x",
                                "backward_error_after_refine_x", "refine_time_x_s", "berr_history", "berr_history_x",
                                "info", "status"})
            EXPECT_TRUE(j.contains(key) && !j[key].is_null()) << "missing '" << key << "' in " << line;
        EXPECT_EQ(j.value("status", ""), "ok") << line;
    }
    EXPECT_EQ(results, 4) << describe(r);
}

TEST_F(Cli, AccuracyUsageErrorsExitTwoWithNothingStarted) {
    TempDir dir("starfact-acc-");
    const std::vector<UsageCase> cases = {
        {{"accuracy", "--orders", "0"}, {"--orders", "0"}},
        {{"accuracy", "--orders", "64,abc"}, {"--orders", "abc"}},
        {{"accuracy", "--tiles", "0"}, {"--tiles", "0"}},
        {{"accuracy", "--tiles", "5000"}, {"--tiles", "5000"}},
        {{"accuracy", "--prec", "q"}, {"--prec", "q"}},
        {{"accuracy", "--kind", "hilbert"}, {"--kind", "hilbert"}},
        {{"accuracy", "--refine", "-1"}, {"--refine", "-1"}},
        {{"accuracy", "--matrices", "0"}, {"--matrices", "0"}},
        {{"accuracy", "--orders", "100000"}, {"--orders", "100000"}},
        {{"accuracy", "--orders", "64", "--csv", dir.path() + "/missing/acc.csv"}, {"--csv", "missing/acc.csv"}},
    };
    for (const UsageCase& c : cases) {
        std::string cmdline;
        for (const auto& a : c.args) cmdline += " " + a;
        SCOPED_TRACE("starfact" + cmdline);
        const CliResult r = run_cli(c.args);
        EXPECT_TRUE(r.exited) << describe(r);
        EXPECT_EQ(r.code, 2) << describe(r);
        for (const std::string& word : c.named)
            EXPECT_NE(r.err.find(word), std::string::npos) << "the message does not name '" << word << "'\n"
                                                           << describe(r);
        EXPECT_EQ(r.out, "") << "output was printed: something started";
        EXPECT_TRUE(r.home_empty) << "StarPU wrote into STARPU_HOME: the runtime was started";
    }
    EXPECT_TRUE(fs::is_empty(dir.path())) << "no output file is left behind";
}

// ---- Files: --A, --B, --X ---------------------------------------------------------------------

/// A C-order (row-major) 2-D float64 .npy file of the column-major m x n matrix A, as NumPy's
/// np.save writes a plain array.
void write_c_order_npy(const std::string& path, int m, int n, const double* A, int lda) {
    std::string header = fmt::format("{{'descr': '<f8', 'fortran_order': False, 'shape': ({}, {}), }}", m, n);
    while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
    header.push_back('\n');
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes.push_back(static_cast<char>(header.size() & 0xff));
    bytes.push_back(static_cast<char>(header.size() >> 8));
    bytes += header;
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
            bytes.append(reinterpret_cast<const char*>(&A[i + static_cast<std::size_t>(j) * lda]), sizeof(double));
    std::ofstream(path, std::ios::binary) << bytes;
}

/// max |X - Y| / max |Y| over two column-major n x k matrices (ld n).
double relative_difference(const std::vector<double>& X, const std::vector<double>& Y) {
    double diff = 0.0, scale = 0.0;
    for (std::size_t k = 0; k < Y.size(); ++k) {
        diff = std::max(diff, std::abs(X[k] - Y[k]));
        scale = std::max(scale, std::abs(Y[k]));
    }
    return std::isnan(diff) ? diff : diff / scale;
}

TEST_F(Cli, GesvFromFilesMatchesLapackOnTheSameFiles) {
    TempDir dir("starfact-files-");
    const int n = 97, nrhs = 3;
    HostMatrix<double> A = random_matrix<double>(n, n, n, seed());
    const HostMatrix<double> B = random_matrix<double>(n, nrhs, n, seed() + 1);
    // LAPACK's dgesv on the same matrices.
    std::vector<double> lu(A.data), ref(B.data);
    std::vector<int> ipiv(n);
    ASSERT_EQ(LAPACKE_dgesv(LAPACK_COL_MAJOR, n, nrhs, lu.data(), n, ipiv.data(), ref.data(), n), 0);

    // Fortran-order A with a Matrix Market B, then a C-order A with a float32 1-D b.
    io::write_npy(dir.path() + "/A.npy", n, n, A.ptr(), A.ld);
    io::write_mtx(dir.path() + "/B.mtx", n, nrhs, B.ptr(), B.ld);
    const CliResult r = run_cli({"gesv", "--A", dir.path() + "/A.npy", "--B", dir.path() + "/B.mtx", "--X",
                                 dir.path() + "/X.npy", "--nb", "32", "--ib", "8", "--check", "--format", "json"});
    ASSERT_TRUE(r.exited && r.code == 0) << describe(r);
    const auto results = json_results(r);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].value("n", -1), n);
    EXPECT_EQ(results[0].value("nrhs", -1), nrhs) << "n and nrhs come from the files";
    const io::Dense<double> X = io::read_npy<double>(dir.path() + "/X.npy");
    ASSERT_EQ(X.m, n);
    ASSERT_EQ(X.n, nrhs);
    EXPECT_LT(checks::solve_residual(n, nrhs, A.ptr(), A.ld, X.data.data(), n, B.ptr(), B.ld), 30.0);
    // Both solves are backward stable on a matrix of modest condition: they agree closely.
    EXPECT_LT(relative_difference(X.data, ref), 1e-9);

    write_c_order_npy(dir.path() + "/Ac.npy", n, n, A.ptr(), A.ld);
    std::vector<float> b(n);
    for (int i = 0; i < n; ++i) b[i] = static_cast<float>(B(i, 0));
    io::write_npy(dir.path() + "/b.npy", n, 1, b.data(), n);
    const CliResult c = run_cli({"gesv", "--A", dir.path() + "/Ac.npy", "--B", dir.path() + "/b.npy", "--X",
                                 dir.path() + "/x.mtx", "--nb", "40"});
    ASSERT_TRUE(c.exited && c.code == 0) << describe(c);
    const io::Dense<double> x = io::read_mtx<double>(dir.path() + "/x.mtx");
    ASSERT_EQ(x.m, n);
    ASSERT_EQ(x.n, 1);
    std::vector<double> bd(b.begin(), b.end()), xref(bd);
    lu = A.data;
    ASSERT_EQ(LAPACKE_dgesv(LAPACK_COL_MAJOR, n, 1, lu.data(), n, ipiv.data(), xref.data(), n), 0);
    EXPECT_LT(relative_difference(x.data, xref), 1e-9) << "the C-order file is the same matrix";
}

TEST_F(Cli, PosvAndGelsFromFilesMatchLapack) {
    TempDir dir("starfact-files-");
    const int n = 70, m = 110, nrhs = 2;
    // posv reads only the --uplo triangle: the other one holds garbage that must not matter.
    HostMatrix<double> S = random_spd<double>(n, n, seed());
    std::vector<double> chol(S.data);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < j; ++i) S(i, j) = 1e6;  // strictly upper: ignored with --uplo L
    const HostMatrix<double> B = random_matrix<double>(m, nrhs, m, seed() + 1);
    std::vector<double> ref(B.data.begin(), B.data.begin() + static_cast<std::size_t>(n) * nrhs);
    for (int c = 0; c < nrhs; ++c)
        for (int i = 0; i < n; ++i) ref[i + static_cast<std::size_t>(c) * n] = B(i, c);
    std::vector<double> bn(ref);
    ASSERT_EQ(LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', n, nrhs, chol.data(), n, ref.data(), n), 0);
    io::write_npy(dir.path() + "/S.npy", n, n, S.ptr(), S.ld);
    io::write_npy(dir.path() + "/Bn.npy", n, nrhs, bn.data(), n);
    const CliResult p = run_cli({"posv", "--A", dir.path() + "/S.npy", "--B", dir.path() + "/Bn.npy", "--X",
                                 dir.path() + "/X.npy", "--nb", "32", "--check"});
    ASSERT_TRUE(p.exited && p.code == 0) << describe(p);
    EXPECT_LT(relative_difference(io::read_npy<double>(dir.path() + "/X.npy").data, ref), 1e-9);

    const HostMatrix<double> A = random_matrix<double>(m, n, m, seed() + 2);
    std::vector<double> qr(A.data), ls(B.data);
    ASSERT_EQ(LAPACKE_dgels(LAPACK_COL_MAJOR, 'N', m, n, nrhs, qr.data(), m, ls.data(), m), 0);
    std::vector<double> lsx;
    for (int c = 0; c < nrhs; ++c)
        lsx.insert(lsx.end(), ls.begin() + static_cast<std::ptrdiff_t>(c) * m,
                   ls.begin() + static_cast<std::ptrdiff_t>(c) * m + n);
    io::write_npy(dir.path() + "/A.npy", m, n, A.ptr(), A.ld);
    io::write_npy(dir.path() + "/B.npy", m, nrhs, B.ptr(), B.ld);
    const CliResult g = run_cli({"gels", "--A", dir.path() + "/A.npy", "--B", dir.path() + "/B.npy", "--X",
                                 dir.path() + "/Xls.npy", "--nb", "32", "--check"});
    ASSERT_TRUE(g.exited && g.code == 0) << describe(g);
    const io::Dense<double> X = io::read_npy<double>(dir.path() + "/Xls.npy");
    ASSERT_EQ(X.m, n) << "the solution has n rows";
    ASSERT_EQ(X.n, nrhs);
    EXPECT_LT(relative_difference(X.data, lsx), 1e-9);
}

TEST_F(Cli, SingularMatrixFromAFileWritesNoSolution) {
    TempDir dir("starfact-files-");
    const int n = 50;
    HostMatrix<double> A = random_matrix<double>(n, n, n, seed());
    for (int i = 0; i < n; ++i) A(i, 20) = 0.0;  // column 21 zero: info = 21 in exact arithmetic
    io::write_npy(dir.path() + "/A.npy", n, n, A.ptr(), A.ld);
    const CliResult r = run_cli({"gesv", "--A", dir.path() + "/A.npy", "--X", dir.path() + "/X.npy", "--nb", "16",
                                 "--format", "json"});
    ASSERT_TRUE(r.exited) << describe(r);
    EXPECT_EQ(r.code, 1) << "one failed run\n" << describe(r);
    const auto results = json_results(r);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].value("info", -1), 21);
    EXPECT_FALSE(fs::exists(dir.path() + "/X.npy")) << "no solution is written when info > 0";
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1) << "nothing else either";
}

TEST_F(Cli, BadFilesExitTwoNamingTheOptionWithNothingStartedOrWritten) {
    TempDir dir("starfact-files-");
    const std::string d = dir.path();
    const HostMatrix<double> A = random_matrix<double>(30, 30, 30, seed());
    const HostMatrix<double> T = random_matrix<double>(40, 30, 40, seed() + 1);
    io::write_npy(d + "/A.npy", 30, 30, A.ptr(), A.ld);
    io::write_npy(d + "/T.npy", 40, 30, T.ptr(), T.ld);
    io::write_npy(d + "/B40.npy", 40, 2, T.ptr(), T.ld);
    io::write_npy_batch(d + "/batch.npy", 2, 30, 15, A.ptr());
    {
        const std::string whole = slurp(d + "/A.npy");
        std::ofstream(d + "/cut.npy", std::ios::binary) << whole.substr(0, whole.size() / 2);
        std::ofstream(d + "/text.npy") << "1 2\n3 4\n";
        std::string i4 = whole;
        i4.replace(i4.find("<f8"), 3, "<i8");
        std::ofstream(d + "/int.npy", std::ios::binary) << i4;
        std::ofstream(d + "/cut.mtx") << "%%MatrixMarket matrix array real general\n30 30\n1\n2\n";
        std::ofstream(d + "/sparse.mtx") << "%%MatrixMarket matrix coordinate real general\n30 30 1\n1 1 1\n";
    }
    const std::vector<UsageCase> cases = {
        {{"gesv", "--A", d + "/T.npy"}, {"--A", "T.npy", "not square", "40 x 30"}},
        {{"potrf", "--A", d + "/T.npy"}, {"--A", "not square"}},
        {{"getrf", "--A", d + "/A.npy", "-m", "40"}, {"-m", "40", "A.npy"}},
        {{"gesv", "--A", d + "/A.npy", "-n", "31"}, {"-n", "31", "A.npy"}},
        {{"gels", "--A", d + "/A.npy", "-n", "20"}, {"-n", "20"}},
        {{"gesv", "--A", d + "/cut.npy"}, {"--A", "cut.npy", "truncated data"}},
        {{"posv", "--A", d + "/text.npy"}, {"--A", "text.npy", "bad magic"}},
        {{"gesv", "--A", d + "/int.npy"}, {"--A", "int.npy", "unsupported dtype '<i8'"}},
        {{"geqrf", "--A", d + "/batch.npy"}, {"--A", "batch.npy", "3-D"}},
        {{"gesv", "--A", d + "/cut.mtx"}, {"--A", "cut.mtx", "truncated data"}},
        {{"gesv", "--A", d + "/sparse.mtx"}, {"--A", "sparse.mtx", "coordinate"}},
        {{"gesv", "--A", d + "/missing.npy"}, {"--A", "missing.npy", "cannot open"}},
        {{"gesv", "--A", d + "/A.csv"}, {"--A", "A.csv", "unknown file type"}},
        {{"gesv", "--A", d + "/A.npy", "--B", d + "/B40.npy"}, {"--B", "B40.npy", "40 rows"}},
        {{"gels", "--A", d + "/T.npy", "--B", d + "/A.npy"}, {"--B", "30 rows"}},
        {{"posv", "-n", "12", "--B", d + "/B40.npy"}, {"--B", "40 rows"}},
        {{"gesv", "--A", d + "/A.npy", "--B", d + "/A.npy", "--nrhs", "4"}, {"--nrhs", "4", "30 x 30"}},
        {{"gesv", "--A", d + "/A.npy", "--B", d + "/batch.npy"}, {"--B", "3-D"}},
        {{"gesv", "--A", d + "/A.npy", "--X", d + "/no/dir/X.npy"}, {"--X", "does not exist"}},
        {{"posv", "--A", d + "/A.npy", "--X", d}, {"--X", "unknown file type"}},
        {{"gels", "--A", d + "/T.npy", "--X", d + "/X.dat"}, {"--X", "X.dat"}},
        {{"getrf", "--A", d + "/A.npy", "--X", d + "/X.npy"}, {"--X"}},
    };
    for (const UsageCase& c : cases) {
        std::string cmdline;
        for (const auto& a : c.args) cmdline += " " + a;
        SCOPED_TRACE("starfact" + cmdline);
        const CliResult r = run_cli(c.args);
        EXPECT_TRUE(r.exited) << describe(r);
        EXPECT_EQ(r.code, 2) << describe(r);
        for (const std::string& word : c.named)
            EXPECT_NE(r.err.find(word), std::string::npos) << "the message does not name '" << word << "'\n"
                                                           << describe(r);
        EXPECT_EQ(r.out, "") << "output was printed: something started";
        EXPECT_TRUE(r.home_empty) << "StarPU wrote into STARPU_HOME: the runtime was started";
    }
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"A.npy", "B40.npy", "T.npy", "batch.npy", "cut.mtx", "cut.npy",
                                               "int.npy", "sparse.mtx", "text.npy"}))
        << "no output file was written";
}

}  // namespace
}  // namespace starfact::test
