// Shared pieces of the subcommands: options, size checks, the configuration header.
#include "drivers/session.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>

#include <fmt/format.h>

#include "codelets/codelets.hpp"
#include "common/error.hpp"

namespace starfact::cli {

void add_factor_options(CLI::App& cmd, FactorOptions& o) {
    const CLI::Range non_negative(0, std::numeric_limits<int>::max());
    const CLI::Range positive(1, std::numeric_limits<int>::max());
    cmd.add_option("-n", o.n, "Matrix order")->check(non_negative)->capture_default_str();
    cmd.add_option("--nb", o.nb, "Tile size; 0 picks one for the workers (1024 with a GPU, 256 without)")
        ->check(non_negative)
        ->capture_default_str();
    cmd.add_option("--prec", o.prec, "Precision: s (float) or d (double)")
        ->check(CLI::IsMember({"s", "d"}))
        ->capture_default_str();
    cmd.add_flag("--check", o.check, "Check the result (LAPACK-style residual, pass below 30)");
    cmd.add_option("--niter", o.niter, "Repetitions; each starts from a fresh copy of the matrix")
        ->check(positive)
        ->capture_default_str();
    cmd.add_option("--seed", o.seed, "Random seed of the matrix (0: random, printed)")->capture_default_str();
    cmd.add_option("--format", o.format, "Output: table, csv or json (one object per line)")
        ->check(CLI::IsMember({"table", "csv", "json"}))
        ->capture_default_str();
}

Format parse_format(const std::string& s) {
    return s == "json" ? Format::Json : s == "csv" ? Format::Csv : Format::Table;
}

void check_problem_size(const char* option, long rows, long cols, int elem_size, int copies) {
    if (rows * cols > static_cast<long>(INT_MAX))
        throw ArgumentError(option, fmt::format("{} x {} has more than 2^31-1 elements, beyond LAPACK's 32-bit indices",
                                                rows, cols));
    const double need = static_cast<double>(rows) * cols * elem_size * copies;
    const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (need > have)
        throw ArgumentError(option, fmt::format("{} x {} needs about {:.1f} GiB of host memory, this machine has {:.1f} GiB",
                                                rows, cols, need / (1 << 30), have / (1 << 30)));
}

nlohmann::ordered_json runtime_config(const Runtime& rt) {
    nlohmann::ordered_json c;
    c["starpu"] = Runtime::starpu_version();
    c["sched"] = rt.scheduler();
    c["ncpu"] = rt.ncpu();
    c["ncuda"] = rt.ncuda();
    c["gpus"] = rt.gpus();
    const std::string dir = Runtime::perfmodel_dir();
    c["perfmodel_dir"] = dir;
    const char* calibrate = std::getenv("STARPU_CALIBRATE");
    c["calibrate"] = calibrate ? calibrate : "0";
    // StarPU 1.3 keeps one file per model and host: <dir>/codelets/45/<symbol>.<hostname>.
    std::string host;
    if (const char* h = std::getenv("STARPU_HOSTNAME"); h && *h) {
        host = h;
    } else {
        char buf[256] = {};
        gethostname(buf, sizeof(buf) - 1);
        host = buf;
    }
    int present = 0;
    const auto symbols = codelets::perfmodel_symbols();
    for (const auto& s : symbols)
        if (std::filesystem::exists(fmt::format("{}/codelets/45/{}.{}", dir, s, host))) ++present;
    c["models"] = fmt::format("{} of {} present for host {}", present, symbols.size(), host);
    return c;
}

int default_nb(const Runtime& rt) { return rt.ncuda() > 0 ? 1024 : 256; }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace starfact::cli
