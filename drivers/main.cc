// starfact: the command line. One subcommand per operation; StarPU's environment variables
// configure the runtime. Exit codes: 0 all checks passed, 2 usage error, else failed checks.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "common/error.hpp"
#include "drivers/commands.hpp"

int main(int argc, char** argv) {
    using namespace starfact;
    CLI::App app{"starfact: tile dense factorizations (Cholesky, LU with incremental pivoting, Householder QR and\n"
                 "least squares) on CPUs and NVIDIA GPUs, scheduled by StarPU.\n"
                 "Runtime configuration comes from StarPU's environment variables (STARPU_NCPU, STARPU_NCUDA,\n"
                 "STARPU_SCHED, STARPU_CALIBRATE, STARPU_HOME, ...).",
                 "starfact"};
    app.require_subcommand(1);
    cli::Run run;
    cli::add_info_command(app, run);
    cli::add_cholesky_commands(app, run);
    cli::add_lu_commands(app, run);
    cli::add_accuracy_command(app, run);
    cli::add_qr_commands(app, run);
    cli::add_calibrate_command(app, run);
    cli::add_sched_study_command(app, run);
    cli::add_batched_command(app, run);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::string commands;
        bool known = false;
        for (const CLI::App* sub : app.get_subcommands({})) {
            commands += (commands.empty() ? "" : ", ") + sub->get_name();
            known = known || (argc > 1 && sub->get_name() == argv[1]);
        }
        if (argc > 1 && argv[1][0] != '-' && !known)
            fmt::print(stderr, "starfact: unknown command '{}' (commands: {})\n", argv[1], commands);
        else if (argc > 1 && argv[1][0] == '-' && app.get_subcommands().empty())
            fmt::print(stderr, "starfact: unknown option '{}' before the command ({}); options follow the command\n",
                       argv[1], e.what());
        else
            fmt::print(stderr, "starfact: {}\n", e.what());
        fmt::print(stderr, "Run 'starfact --help' or 'starfact <command> --help'.\n");
        return 2;
    }
    try {
        if (run) cli::preflight_models();
        return run ? run() : 2;
    } catch (const ArgumentError& e) {
        fmt::print(stderr, "starfact: {}\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        fmt::print(stderr, "starfact: error: {}\n", e.what());
        return 1;
    }
}
