// What every subcommand shares: common options, their validation, the runtime header.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "common/runtime.hpp"
#include "drivers/report.hpp"

namespace starfact::cli {

/// Options of the factorization subcommands.
struct FactorOptions {
    int n = 4096;
    int nb = 0;  ///< 0: automatic (1024 with a GPU, 256 without)
    std::string prec = "d";
    bool check = false;
    int niter = 1;
    std::uint64_t seed = 0;  ///< 0: drawn at random and printed
    std::string format = "table";
    std::string uplo = "L";  ///< Cholesky only
    int nrhs = 1;            ///< solves only
    int m = -1;              ///< LU only: rows (-1: n)
    int ib = 0;              ///< LU only: inner block (0: automatic)
    std::string schedule = "dynamic";  ///< LU only: dynamic, static-rl, static-ll, static-bfll
    std::string trtri = "auto";        ///< LU only: the trtri + gemm variant, auto (with a GPU), on, off
};

/// Adds -n, --nb, --prec, --check, --niter, --seed, --format to a subcommand.
void add_factor_options(CLI::App& cmd, FactorOptions& o);
Format parse_format(const std::string& s);

/// Usage errors found after parsing (exit code 2, nothing started): sizes that do not fit
/// in memory or in 32-bit LAPACK indices.
void check_problem_size(const char* option, long rows, long cols, int elem_size, int copies);

/// The configuration in effect: StarPU version, scheduler, workers, GPUs, models.
nlohmann::ordered_json runtime_config(const Runtime& rt);

/// nb when the user gave 0: a size that suits the workers StarPU started.
int default_nb(const Runtime& rt);

/// Median of a non-empty list.
double median(std::vector<double> v);

}  // namespace starfact::cli
