// The report file and document, read once for the gate and the advisor
// (include/fusebench/report_document.hpp).
#include "fusebench/report_document.hpp"

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <tuple>

#include "fusebench/input_files.hpp"

namespace fusebench::advise {

void fail_field(const std::string& file, const std::string& field, const std::string& what) {
  throw InputError(file + ": " + field + ": " + what);
}

std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string read_report_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    const auto inside = std::filesystem::path(path) / "report.json";
    fail_field(path, "file",
               "is a directory; expected a report.json file" +
                   (std::filesystem::is_regular_file(inside, ec)
                        ? " (this directory has one: " + inside.string() + ")"
                        : std::string(" (fusebench --report=FILE writes one)")));
  }
  try {
    // Registered, bounded, a fifo or device refused without waiting (input_files.hpp).
    return read_input_file(path, "the report");
  } catch (const InputFileError& e) {
    // As the reader's other errors: "<file>: file: <what is wrong>".
    const std::string what = e.what(), prefix = "the report " + path + ": ";
    fail_field(path, "file", what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what);
  }
}

nlohmann::json parse_report_document(std::string_view text, const std::string& file) {
  nlohmann::json root;
  try {
    root = parse_input_json(text, file);
  } catch (const InputFileError& e) {
    throw InputError(e.what());
  } catch (const nlohmann::json::exception& e) {
    std::string hint;
    if (text.find("NaN") != std::string_view::npos ||
        text.find("Infinity") != std::string_view::npos) {
      hint =
          " (it contains NaN/Infinity, which Google Benchmark writes for non-finite values and "
          "strict JSON forbids)";
    }
    fail_field(file, "document", std::string("not valid JSON: ") + e.what() + hint);
  }
  if (!root.is_object())
    fail_field(file, "top level", "expected an object with \"context\" and \"benchmarks\"");
  const auto ctx = root.find("context");
  if (ctx == root.end()) fail_field(file, "context", "missing (not a Google Benchmark report?)");
  if (!ctx->is_object()) fail_field(file, "context", "expected an object, got " + shown(*ctx));
  const auto benches = root.find("benchmarks");
  if (benches == root.end())
    fail_field(file, "benchmarks", "missing (not a Google Benchmark report?)");
  if (!benches->is_array())
    fail_field(file, "benchmarks", "expected an array, got " + shown(*benches));
  return root;
}

ElementHeader read_element_header(const nlohmann::json& b, std::size_t index,
                                  const std::string& file) {
  const std::string where = "benchmarks[" + std::to_string(index) + "]";
  if (!b.is_object()) fail_field(file, where, "expected an object, got " + shown(b));
  const auto name = b.find("name");
  if (name == b.end() || !name->is_string() || name->get<std::string>().empty())
    fail_field(file, where + ".name", "missing or not a non-empty string");
  ElementHeader h;
  h.name = name->get<std::string>();
  h.at = where + " (" + h.name + ")";
  auto text = [&](const char* key, const std::string& fallback) {
    const auto it = b.find(key);
    if (it == b.end()) return fallback;
    if (!it->is_string())
      fail_field(file, h.at + "." + key, "expected a string, got " + shown(*it));
    return it->get<std::string>();
  };
  h.run_name = text("run_name", h.name);
  h.run_type = text("run_type", "iteration");
  if (h.run_type != "iteration" && h.run_type != "aggregate") {
    fail_field(file, h.at + ".run_type",
               "expected \"iteration\" or \"aggregate\", got \"" + h.run_type + "\"");
  }
  if (const auto it = b.find("error_occurred"); it != b.end()) {
    if (!it->is_boolean())
      fail_field(file, h.at + ".error_occurred", "expected true or false, got " + shown(*it));
    h.error = it->get<bool>();
  }
  h.error_message = text("error_message", h.error ? "no error_message" : "");
  return h;
}

std::vector<ElementHeader> read_elements(const nlohmann::json& root, const std::string& file) {
  const auto& benchmarks = root.at("benchmarks");
  std::vector<ElementHeader> headers;
  // (name, run type, repetition, aggregate) -> the first element's index: a second one is a
  // report that would be read as one entry while holding two measurements.
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::size_t> seen;
  for (std::size_t i = 0; i < benchmarks.size(); ++i) {
    const auto& b = benchmarks[i];
    ElementHeader h = read_element_header(b, i, file);
    for (const auto& [key, value] : b.items()) {
      if (value.is_number() && !std::isfinite(value.get<double>()))
        fail_field(file, h.at + "." + key,
                   std::string("not a finite number (got ") +
                       (std::isnan(value.get<double>()) ? "nan"
                        : value.get<double>() > 0       ? "inf"
                                                        : "-inf") +
                       "): expected a finite number");
    }
    const auto agg = b.find("aggregate_name");
    const std::string aggregate = agg != b.end() && agg->is_string() ? agg->get<std::string>() : "";
    if (!h.error) {
      // A spread (stddev, cv) may be 0; a time is a duration: 0 or less is no measurement.
      const auto unit = b.find("aggregate_unit");
      const bool spread = h.run_type == "aggregate" &&
                          (aggregate == "stddev" || aggregate == "cv" ||
                           (unit != b.end() && unit->is_string() && *unit == "percentage"));
      const auto real = b.find("real_time");
      if (real == b.end())
        fail_field(file, h.at + ".real_time", "missing (every entry that ran has a time)");
      for (const char* key : {"real_time", "time_mean", "time_median", "time_min",
                              "time_median_ci_low", "time_median_ci_high", "cpu_time"}) {
        const auto it = b.find(key);
        if (it == b.end()) continue;
        if (!it->is_number())
          fail_field(file, h.at + "." + key, "expected a number of time, got " + shown(*it));
        const double v = it->get<double>();
        // cpu_time is the host thread's, ~0 while it waits on a GPU; neither tool reads it.
        const bool may_be_zero = spread || std::string(key) == "cpu_time";
        if (v < 0 || (v == 0 && !may_be_zero)) {
          fail_field(file, h.at + "." + key,
                     shown(*it) + " is not a valid time: expected a positive number (" +
                         (may_be_zero ? "or 0 " : "") + "in the entry's time unit)");
        }
      }
    }
    std::string repetition;
    if (const auto rep = b.find("repetition_index"); rep != b.end()) repetition = rep->dump();
    const auto key = std::make_tuple(h.name, h.run_type, repetition, aggregate);
    const auto [it, fresh] = seen.emplace(key, i);
    if (!fresh) {
      fail_field(
          file, h.at + ".name",
          "\"" + h.name + "\" appears twice (benchmarks[" + std::to_string(it->second) +
              "] and benchmarks[" + std::to_string(i) +
              "]): one report holds one entry per name and repetition; merge or rename them");
    }
    headers.push_back(std::move(h));
  }
  return headers;
}

}  // namespace fusebench::advise
