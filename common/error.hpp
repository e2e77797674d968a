// Error types: argument errors (caught before any work) and runtime failures.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace starfact {

/// A bad argument, found before any task was submitted; the input is untouched.
class ArgumentError : public std::invalid_argument {
public:
    ArgumentError(std::string argument, const std::string& message)
        : std::invalid_argument(fmt::format("invalid argument '{}': {}", argument, message)),
          argument_(std::move(argument)) {}
    const std::string& argument() const noexcept { return argument_; }

private:
    std::string argument_;
};

/// A failure of the runtime or of a library underneath (StarPU, CUDA, allocation).
class RuntimeError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Throws ArgumentError(name, message) unless cond holds.
inline void require(bool cond, const char* name, const std::string& message) {
    if (!cond) throw ArgumentError(name, message);
}

}  // namespace starfact
