// Reporter: table, CSV and JSON-lines output of configuration and results.
#include "drivers/report.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace starfact::cli {
namespace {
// Table columns are at least 12 wide and always one wider than their name.
std::size_t width(const std::string& column) { return std::max<std::size_t>(12, column.size() + 1); }

// A CSV field as RFC 4180 writes it: quoted, with its quotes doubled, when it holds a comma, a quote or
// a line break (a command line in a cell, say); as it is otherwise.
std::string csv_field(const std::string& v) {
    if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
    std::string q = "\"";
    for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}
}  // namespace

Reporter::Reporter(Format format, std::vector<std::string> columns, std::FILE* out)
    : format_(format), columns_(std::move(columns)), out_(out) {}

void Reporter::header(const nlohmann::ordered_json& config) {
    if (format_ == Format::Json) {
        nlohmann::ordered_json j = config;
        j["record"] = "config";
        fmt::print(out_, "{}\n", j.dump());
    } else {
        for (auto it = config.begin(); it != config.end(); ++it) fmt::print(out_, "# {}: {}\n", it.key(), cell(*it));
    }
    std::fflush(out_);
}

std::string Reporter::cell(const nlohmann::ordered_json& v) const {
    if (v.is_null()) return "-";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number_float()) {
        const double d = v.get<double>();
        return fmt::format("{:.4g}", d);
    }
    if (v.is_array()) {
        std::string s;
        for (const auto& e : v) s += (s.empty() ? "" : "; ") + cell(e);
        return s;
    }
    return v.dump();
}

void Reporter::row(const nlohmann::ordered_json& values) {
    if (format_ == Format::Json) {
        nlohmann::ordered_json j = values;
        j["record"] = "result";
        fmt::print(out_, "{}\n", j.dump());
        std::fflush(out_);
        return;
    }
    const bool csv = format_ == Format::Csv;
    if (!printed_columns_) {
        std::string line;
        for (const auto& c : columns_) line += csv ? (line.empty() ? c : "," + c) : fmt::format("{:>{}}", c, width(c));
        fmt::print(out_, "{}\n", line);
        printed_columns_ = true;
    }
    std::string line;
    for (const auto& c : columns_) {
        std::string v = values.contains(c) ? cell(values.at(c)) : "-";
        if (csv) v = csv_field(v);
        line += csv ? (line.empty() ? v : "," + v) : fmt::format("{:>{}}", v, width(c));
    }
    fmt::print(out_, "{}\n", line);
    std::fflush(out_);
}

}  // namespace starfact::cli
