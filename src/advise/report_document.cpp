// The report file and document, read once for the gate and the advisor
// (include/fusebench/report_document.hpp).
#include "fusebench/report_document.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fusebench::advise {
namespace {

[[noreturn]] void fail(const std::string& file, const std::string& field, const std::string& what) {
  throw InputError(file + ": " + field + ": " + what);
}

std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace

std::string read_report_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    const auto inside = std::filesystem::path(path) / "report.json";
    fail(path, "file",
         "is a directory; expected a report.json file" +
             (std::filesystem::is_regular_file(inside, ec)
                  ? " (this directory has one: " + inside.string() + ")"
                  : std::string(" (fusebench --report=FILE writes one)")));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "file", "cannot be opened");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (!in.good() && !in.eof()) fail(path, "file", "cannot be read");
  return buf.str();
}

nlohmann::json parse_report_document(std::string_view text, const std::string& file) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    std::string hint;
    if (text.find("NaN") != std::string_view::npos ||
        text.find("Infinity") != std::string_view::npos) {
      hint =
          " (it contains NaN/Infinity, which Google Benchmark writes for non-finite values and "
          "strict JSON forbids)";
    }
    fail(file, "document", std::string("not valid JSON: ") + e.what() + hint);
  }
  if (!root.is_object())
    fail(file, "top level", "expected an object with \"context\" and \"benchmarks\"");
  const auto ctx = root.find("context");
  if (ctx == root.end()) fail(file, "context", "missing (not a Google Benchmark report?)");
  if (!ctx->is_object()) fail(file, "context", "expected an object, got " + shown(*ctx));
  const auto benches = root.find("benchmarks");
  if (benches == root.end()) fail(file, "benchmarks", "missing (not a Google Benchmark report?)");
  if (!benches->is_array()) fail(file, "benchmarks", "expected an array, got " + shown(*benches));
  return root;
}

ElementHeader read_element_header(const nlohmann::json& b, std::size_t index,
                                  const std::string& file) {
  const std::string where = "benchmarks[" + std::to_string(index) + "]";
  if (!b.is_object()) fail(file, where, "expected an object, got " + shown(b));
  const auto name = b.find("name");
  if (name == b.end() || !name->is_string() || name->get<std::string>().empty())
    fail(file, where + ".name", "missing or not a non-empty string");
  ElementHeader h;
  h.name = name->get<std::string>();
  h.at = where + " (" + h.name + ")";
  auto text = [&](const char* key, const std::string& fallback) {
    const auto it = b.find(key);
    if (it == b.end()) return fallback;
    if (!it->is_string()) fail(file, h.at + "." + key, "expected a string, got " + shown(*it));
    return it->get<std::string>();
  };
  h.run_name = text("run_name", h.name);
  h.run_type = text("run_type", "iteration");
  if (h.run_type != "iteration" && h.run_type != "aggregate") {
    fail(file, h.at + ".run_type",
         "expected \"iteration\" or \"aggregate\", got \"" + h.run_type + "\"");
  }
  if (const auto it = b.find("error_occurred"); it != b.end()) {
    if (!it->is_boolean())
      fail(file, h.at + ".error_occurred", "expected true or false, got " + shown(*it));
    h.error = it->get<bool>();
  }
  h.error_message = text("error_message", h.error ? "no error_message" : "");
  return h;
}

}  // namespace fusebench::advise
