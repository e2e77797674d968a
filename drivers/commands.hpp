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

}  // namespace starfact::cli
