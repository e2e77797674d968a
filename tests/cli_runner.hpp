// Runs the starfact command line as a child process for the CLI-level suites (cli_errors, faults):
// its own environment overrides, a StarPU home (fresh, or given to share it between runs), stdout
// and stderr captured to files, signals sent mid-run, a timeout that kills a hung child.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

#ifndef STARFACT_CLI_PATH
#error "STARFACT_CLI_PATH must name the starfact executable"
#endif

extern char** environ;

namespace starfact::test::cli {
namespace fs = std::filesystem;

/// The starfact beside this test binary (build/bin or a GPU-machine bundle's bin), else the
/// build-time path.
inline std::string cli_path() {
    std::error_code ec;
    const fs::path beside = fs::read_symlink("/proc/self/exe", ec).parent_path() / "starfact";
    if (!ec && fs::exists(beside)) return beside.string();
    return STARFACT_CLI_PATH;
}

inline std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

/// Every regular file under dir (recursively), as paths relative to it, sorted.
inline std::vector<std::string> files_under(const std::string& dir) {
    std::vector<std::string> names;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
        if (it->is_regular_file()) names.push_back(fs::relative(it->path(), dir).string());
    std::sort(names.begin(), names.end());
    return names;
}

struct Result {
    bool exited = false;     ///< false: ended by a signal
    int code = -1;           ///< exit code when exited, else the signal number
    bool timed_out = false;  ///< killed by the runner's timeout
    std::string out, err;
    bool home_untouched = true;  ///< StarPU wrote nothing into STARPU_HOME (it never started)

    std::string describe() const {
        return (exited ? "exit code " + std::to_string(code) : "ended by signal " + std::to_string(code)) +
               (timed_out ? " (timed out)" : "") + "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
    }
};

/// One child process of starfact. `home`: the STARPU_HOME to use; empty: a fresh one seeded with
/// the bus calibration (test_support's ScopedStarpuHome), removed with the process object.
class Process {
public:
    Process(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
            const std::string& home = "")
        : io_("starfact-cli-") {
        if (home.empty()) {
            own_home_ = std::make_unique<ScopedStarpuHome>();
            home_ = own_home_->path();
        } else {
            home_ = home;
        }
        before_ = files_under(home_);
        out_path_ = io_.path() + "/stdout";
        err_path_ = io_.path() + "/stderr";
        std::vector<std::string> argv_s{cli_path()};
        argv_s.insert(argv_s.end(), args.begin(), args.end());
        std::vector<std::string> env_s;
        std::vector<std::string> overrides = env;
        overrides.push_back("STARPU_HOME=" + home_);
        for (char** e = environ; *e != nullptr; ++e) env_s.emplace_back(*e);
        for (const std::string& kv : overrides) {
            const std::string name = kv.substr(0, kv.find('=') + 1);
            env_s.erase(std::remove_if(env_s.begin(), env_s.end(),
                                       [&](const std::string& e) { return e.compare(0, name.size(), name) == 0; }),
                        env_s.end());
        }
        env_s.insert(env_s.end(), overrides.begin(), overrides.end());
        std::vector<char*> argv, envp;
        for (auto& a : argv_s) argv.push_back(a.data());
        argv.push_back(nullptr);
        for (auto& e : env_s) envp.push_back(e.data());
        envp.push_back(nullptr);
        pid_ = fork();
        if (pid_ == 0) {
            if (!freopen(out_path_.c_str(), "w", stdout) || !freopen(err_path_.c_str(), "w", stderr)) _exit(126);
            // As started from a terminal, whatever the test runner ignores (a shell ignores SIGINT
            // in the background jobs it starts, and exec keeps an ignored signal ignored).
            ::signal(SIGINT, SIG_DFL);
            ::signal(SIGTERM, SIG_DFL);
            execve(argv[0], argv.data(), envp.data());
            _exit(127);
        }
        if (pid_ < 0) ADD_FAILURE() << "fork failed: " << std::strerror(errno);
    }
    ~Process() {
        if (pid_ > 0 && !reaped_) {
            kill(pid_, SIGKILL);
            int status = 0;
            waitpid(pid_, &status, 0);
        }
    }
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    const std::string& home() const { return home_; }

    /// Waits until stdout contains `text` (true) or the child ended or `timeout` passed (false).
    bool wait_for_stdout(const std::string& text, std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            if (slurp(out_path_).find(text) != std::string::npos) return true;
            if (poll()) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }

    void signal(int sig) {
        if (pid_ > 0 && !reaped_) kill(pid_, sig);
    }

    /// Waits for the end (killing the child after `timeout`) and collects the result.
    Result finish(std::chrono::seconds timeout = std::chrono::seconds(120)) {
        Result r;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (!poll()) {
            if (std::chrono::steady_clock::now() > deadline) {
                r.timed_out = true;
                kill(pid_, SIGKILL);
                int status = 0;
                waitpid(pid_, &status, 0);
                status_ = status;
                reaped_ = true;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        r.exited = WIFEXITED(status_);
        r.code = r.exited ? WEXITSTATUS(status_) : WTERMSIG(status_);
        r.out = slurp(out_path_);
        r.err = slurp(err_path_);
        r.home_untouched = files_under(home_) == before_;
        EXPECT_NE(r.exited && r.code == 127, true) << "could not execute " << cli_path();
        return r;
    }

private:
    /// Reaps the child if it has ended; true once it has.
    bool poll() {
        if (reaped_ || pid_ <= 0) return true;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            status_ = status;
            reaped_ = true;
        }
        return reaped_;
    }

    TempDir io_;
    std::unique_ptr<ScopedStarpuHome> own_home_;
    std::string home_, out_path_, err_path_;
    std::vector<std::string> before_;
    pid_t pid_ = -1;
    int status_ = 0;
    bool reaped_ = false;
};

/// Runs starfact to the end.
inline Result run(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                  const std::string& home = "", std::chrono::seconds timeout = std::chrono::seconds(120)) {
    Process p(args, env, home);
    return p.finish(timeout);
}

inline std::string command_line(const std::vector<std::string>& args) {
    std::string s = "starfact";
    for (const auto& a : args) s += " " + a;
    return s;
}

}  // namespace starfact::test::cli
