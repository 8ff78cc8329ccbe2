#pragma once
// The one reader of a fusebench report's file and document, shared by the gate and the advisor
// (each then reads the entries it needs): the file (a directory or an unreadable path is named as
// such), strict JSON, and the top level every Google Benchmark report has. Errors are
// advise::InputError naming the file and the field (gate::InputError is the same type).
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fusebench::advise {

// Input the advisor (or the gate) cannot judge; what() names the file, the field and the value.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws InputError "FILE: FIELD: WHAT", the form of every message of the reader.
[[noreturn]] void fail_field(const std::string& file, const std::string& field,
                             const std::string& what);

// A JSON value as a message shows it (its text, cut to 60 characters).
std::string shown(const nlohmann::json& value);

// The text of the report at `path`. Throws InputError for a directory ("is a directory; expected
// a report.json file", naming DIR/report.json when it exists) or a file that cannot be opened.
std::string read_report_file(const std::string& path);

// Parses `text` as strict JSON (NaN/Infinity, which Google Benchmark writes for non-finite
// values, named as such) and checks the top level: an object with a "context" object and a
// "benchmarks" array. Throws InputError "FILE: FIELD: what".
nlohmann::json parse_report_document(std::string_view text, const std::string& file);

// What every element of "benchmarks" has, read and checked one way for both readers.
struct ElementHeader {
  std::string name;           // "name", non-empty
  std::string run_name;       // "run_name", else the name (repetitions and aggregates share it)
  std::string run_type;       // "iteration" (also when absent) or "aggregate"
  std::string at;             // "benchmarks[3] (NAME)", the prefix of the element's field names
  bool error = false;         // error_occurred
  std::string error_message;  // "error_message", or "no error_message" for an error without one
};

// Throws InputError "FILE: benchmarks[I]...: what" for an element that is not an object, a
// missing or empty name, a run_name, run_type or error_message that is not a string, a run_type
// other than iteration or aggregate, or an error_occurred that is not a boolean.
ElementHeader read_element_header(const nlohmann::json& element, std::size_t index,
                                  const std::string& file);

// The rules every report's entries follow, one implementation for the gate and the advisor
// (issue 27): each element's header (read_element_header), every number finite, every time of an
// entry that ran (real_time, cpu_time, time_*) a positive number and real_time present, no two
// elements with one name (the same name, run type, repetition and aggregate). Returns the
// headers in order. Throws InputError "FILE: benchmarks[I] (NAME).FIELD: what" naming the value.
std::vector<ElementHeader> read_elements(const nlohmann::json& root, const std::string& file);

}  // namespace fusebench::advise
