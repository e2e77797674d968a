// Registration of the subcommands. Each registers itself on the app and sets `run` to the
// function that executes it after a successful parse; that function returns the exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace starfact::cli {

using Run = std::function<int()>;

void add_info_command(CLI::App& app, Run& run);
void add_cholesky_commands(CLI::App& app, Run& run);
void add_lu_commands(CLI::App& app, Run& run);
void add_accuracy_command(CLI::App& app, Run& run);
void add_qr_commands(CLI::App& app, Run& run);
void add_calibrate_command(CLI::App& app, Run& run);
void add_sched_study_command(CLI::App& app, Run& run);
void add_batched_command(CLI::App& app, Run& run);

/// The pre-flight of the performance-model directory (perfmodels/model_check.hpp), before any
/// StarPU starts: throws models::ModelFileError (exit code 2) naming a file StarPU would abort
/// on and its fix; prints its notes on stderr. Calibrating when STARPU_CALIBRATE >= 1.
void preflight_models();

}  // namespace starfact::cli
