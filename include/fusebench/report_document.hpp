#pragma once
// The one reader of a fusebench report's file and document, shared by the gate and the advisor
// (each then reads the entries it needs): the file (a directory or an unreadable path is named as
// such), strict JSON, and the top level every Google Benchmark report has. Errors are
// advise::InputError naming the file and the field (gate::InputError is the same type).
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fusebench/advise.hpp"

namespace fusebench::advise {

// The text of the report at `path`. Throws InputError for a directory ("is a directory; expected
// a report.json file", naming DIR/report.json when it exists) or a file that cannot be opened.
std::string read_report_file(const std::string& path);

// Parses `text` as strict JSON (NaN/Infinity, which Google Benchmark writes for non-finite
// values, named as such) and checks the top level: an object with a "context" object and a
// "benchmarks" array. Throws InputError "FILE: FIELD: what".
nlohmann::json parse_report_document(std::string_view text, const std::string& file);

}  // namespace fusebench::advise
