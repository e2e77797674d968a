// Output of the command line: a configuration header and result rows as a table, CSV or
// JSON lines. Every row is a JSON object internally so the three formats carry the same data.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace starfact::cli {

enum class Format { Table, Csv, Json };

class Reporter {
public:
    Reporter(Format format, std::vector<std::string> columns, std::FILE* out = stdout);
    /// The configuration in effect: "# key: value" lines (table, CSV) or one JSON object
    /// with "record": "config".
    void header(const nlohmann::ordered_json& config);
    /// One result: a table line, a CSV line (fields quoted as RFC 4180 does when they hold a comma,
    /// a quote or a line break) or one JSON object with "record": "result".
    void row(const nlohmann::ordered_json& values);

private:
    std::string cell(const nlohmann::ordered_json& v) const;
    Format format_;
    std::vector<std::string> columns_;
    std::FILE* out_;
    bool printed_columns_ = false;
};

}  // namespace starfact::cli
