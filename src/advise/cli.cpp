// fusebench-advise's command line, kept in the library so tests drive it without a subprocess.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "fusebench/advise.hpp"
#include "fusebench/input_files.hpp"
#include "fusebench/output_path.hpp"

namespace fusebench::advise {

double parse_margin(const std::string& text, const std::string& flag) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v)) {
    throw InputError(flag + ": \"" + text + "\" is not a number (a fraction, e.g. 0.03 for 3%)");
  }
  if (v < 0 || v >= 1) {
    throw InputError(flag + ": " + text + " is outside [0, 1) (a fraction, e.g. 0.03 for 3%)");
  }
  return v;
}

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "fusebench-advise: per comparison, the token ranges where each variant is the one to run, "
      "decided only where the 95% intervals say so (docs/advise.md). Exit 0 written, 2 unusable "
      "input."};
  std::vector<std::string> paths;
  std::string format = "json", output, margin_text = "0.03";
  app.add_option("REPORT", paths, "fusebench reports (JSON); several of one device are pooled")
      ->required();
  app.add_option("--format", format, "json, markdown, cpp or python")->capture_default_str();
  app.add_option("-o,--output", output, "write here instead of stdout");
  app.add_option("--margin", margin_text,
                 "a variant is `use:` when its interval lies above 1 + margin; `either` within it")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? 0 : 2;
  }
  try {
    if (format != "json" && format != "markdown" && format != "cpp" && format != "python") {
      throw InputError("--format: unknown format \"" + format +
                       "\" (valid: json, markdown, cpp, python)");
    }
    const double margin = parse_margin(margin_text);
    // Before anything is read or written: neither the output nor its temporary file may be an
    // input (issue 27: `-o base.json` replaced the report it read).
    OutputTarget target;
    reset_file_registry();  // one call is one run (tests play several in one process)
    for (const auto& p : paths) register_input("an input report", p);
    if (!output.empty()) {
      try {
        target = check_output(output, "-o");
      } catch (const std::invalid_argument& e) {
        throw InputError(e.what());
      }
    }
    std::vector<Report> reports;
    for (const auto& p : paths) reports.push_back(load_report(p));
    const Table table = build(std::move(reports), margin);
    std::string text;
    if (format == "json") {
      text = to_json(table).dump(1) + "\n";
    } else if (format == "markdown") {
      text = to_markdown(table);
    } else if (format == "cpp") {
      text = to_cpp(table);
    } else {
      text = to_python(table);
    }
    if (output.empty()) {
      out << text;
      return 0;
    }
    // By the output rule: a file through a temporary beside it, renamed (a reader never sees half
    // a table); a symlink's target; stdout, a fifo or a device streamed to.
    try {
      write_output(target, text);
    } catch (const std::exception& e) {
      throw InputError("-o: " + std::string(e.what()));
    }
    return 0;
  } catch (const InputError& e) {
    err << "fusebench-advise: error: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace fusebench::advise
