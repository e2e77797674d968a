// `starfact info`: what StarPU sees on this machine.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "batched/batched.hpp"
#include "batched/vbatched.hpp"
#include "codelets/codelets.hpp"
#include "perfmodels/model_check.hpp"
#include "drivers/commands.hpp"
#include "drivers/session.hpp"
#ifdef STARFACT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace starfact::cli {

void add_info_command(CLI::App& app, Run& run) {
    auto format = std::make_shared<std::string>("table");
    CLI::App* cmd = app.add_subcommand("info", "Show the workers, GPUs, memory and performance models StarPU sees");
    cmd->add_option("--format", *format, "Output: table or json")->check(CLI::IsMember({"table", "json"}));
    cmd->callback([&run, format] {
        run = [format]() -> int {
            Runtime rt;
            nlohmann::ordered_json c = runtime_config(rt);
            // Every model starfact has: the tile codelets', the batched and the variable-size
            // batched codelets'.
            std::vector<std::string> symbols = codelets::perfmodel_symbols();
            for (const std::string& s : batched::tasks::perfmodel_symbols()) symbols.push_back(s);
            for (const std::string& s : batched::tasks::vperfmodel_symbols()) symbols.push_back(s);
            int present = 0;
            for (const std::string& s : symbols) present += std::filesystem::exists(models::model_path(s)) ? 1 : 0;
            c["models"] = fmt::format("{} of {} present for host {} ({} tile, {} batched, {} variable-size batched)",
                                      present, symbols.size(), models::host_name(),
                                      codelets::perfmodel_symbols().size(), batched::tasks::perfmodel_symbols().size(),
                                      batched::tasks::vperfmodel_symbols().size());
            nlohmann::ordered_json workers = nlohmann::ordered_json::array();
            for (const auto& w : rt.workers()) workers.push_back(fmt::format("{} {}: {}", w.kind, w.id, w.name));
            c["workers"] = workers;
#ifdef STARFACT_HAVE_CUDA
            nlohmann::ordered_json mem = nlohmann::ordered_json::array();
            int count = 0;
            if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
            for (int d = 0; d < count; ++d) {
                cudaDeviceProp p;
                if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
                    mem.push_back(fmt::format("GPU {}: {}, {:.1f} GiB, {} SMs, compute capability {}.{}", d, p.name,
                                              static_cast<double>(p.totalGlobalMem) / (1 << 30), p.multiProcessorCount,
                                              p.major, p.minor));
            }
            c["gpu_memory"] = mem;
            c["cuda_build"] = true;
#else
            c["cuda_build"] = false;
#endif
            Reporter(parse_format(*format), {}).header(c);
            return 0;
        };
    });
}

}  // namespace starfact::cli
