// fusebench-gate's command line, kept in the library so tests drive it without a subprocess.
#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <string>

#include "fusebench/advise.hpp"
#include "fusebench/gate.hpp"
#include "fusebench/report_document.hpp"

namespace fusebench::gate {

namespace {

// A non-negative number of a flag, e.g. --time-threshold=7.5; CLI11's own range check on a
// double names a range of 300 digits, so the flags are read as text and checked here.
double parse_non_negative(const std::string& text, const std::string& flag, const char* what) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v) || v < 0) {
    throw InputError(flag + ": \"" + text + "\" is not a valid value: expected a number >= 0 (" +
                     what + ")");
  }
  return v;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "fusebench-gate: compares CURRENT against BASELINE. Exit 0 pass, 1 regression, 2 unusable "
      "input."};
  std::string baseline_path, current_path, summary_md;
  Options o;
  std::string time_pct, noise_sigmas = "2", bytes_pct = "2", exact_pct = "0";
  bool verbose = false;
  app.add_option("BASELINE", baseline_path, "baseline report (JSON)")->required();
  app.add_option("CURRENT", current_path, "current report (JSON)")->required();
  app.add_option("--time-threshold", time_pct,
                 "percent change the time rule reports: SLOWER (fails) when the time ratio's "
                 "whole 95% interval lies above 1 + PCT/100 [default: 5 for GPU reports, 50 when "
                 "either report is from the CPU backend]")
      ->type_name("PCT");
  app.add_option("--noise-sigmas", noise_sigmas,
                 "entries without a median interval: CVs on each side of their time")
      ->type_name("K")
      ->capture_default_str();
  app.add_option("--bytes-tolerance", bytes_pct, "percent change allowed in measured byte counters")
      ->type_name("PCT")
      ->capture_default_str();
  app.add_option("--exact-tolerance", exact_pct,
                 "percent change allowed in exact counters (launches, kernels)")
      ->type_name("PCT")
      ->capture_default_str();
  app.add_flag("--allow-device-mismatch", o.allow_device_mismatch,
               "compare reports from different devices");
  app.add_flag("--allow-thread-mismatch", o.allow_thread_mismatch,
               "judge time, speedup and advice although the reports ran with different CPU "
               "thread counts (context.cpu_threads)");
  app.add_flag("--allow-missing-counters", o.allow_missing_counters,
               "a counter in BASELINE but absent in CURRENT is a note, not a failure");
  app.add_flag("--ignore-time", o.ignore_time,
               "gate counters only (no time, speedup or advice rule)");
  std::string advice_margin = "0.03";
  app.add_option("--advice-margin", advice_margin,
                 "the advice rule's margin, as fusebench-advise --margin")
      ->capture_default_str();
  app.add_option("--summary-md", summary_md,
                 "also write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)");
  app.add_flag("-v,--verbose", verbose, "list passing counters too");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? 0 : 2;
  }
  try {
    if (!time_pct.empty())
      o.time_threshold =
          parse_non_negative(time_pct, "--time-threshold", "a percentage, e.g. 5 for 5%") / 100;
    o.noise_sigmas = parse_non_negative(noise_sigmas, "--noise-sigmas", "CVs, e.g. 2");
    o.bytes_tolerance =
        parse_non_negative(bytes_pct, "--bytes-tolerance", "a percentage, e.g. 2 for 2%") / 100;
    o.exact_tolerance =
        parse_non_negative(exact_pct, "--exact-tolerance", "a percentage, e.g. 0") / 100;
    o.advice_margin = advise::parse_margin(advice_margin, "--advice-margin");
    // Each file is read once; the gate and the advisor read their entries from the same text.
    const std::string baseline_text = advise::read_report_file(baseline_path);
    const std::string current_text = advise::read_report_file(current_path);
    const Report baseline = parse_report(baseline_text, baseline_path);
    const Report current = parse_report(current_text, current_path);
    Result result = compare(baseline, current, o);
    if (!result.timing_off.empty()) {
      result.advice.off = result.timing_off;
    } else {
      // The same code as fusebench-advise, one report per side (docs/gate.md).
      compare_advice(
          advise::build({advise::parse_report(baseline_text, baseline_path)}, o.advice_margin),
          advise::build({advise::parse_report(current_text, current_path)}, o.advice_margin),
          result);
    }
    print_table(result, out, verbose);
    if (!summary_md.empty()) {
      // Appends, as GitHub's step summary expects several writers.
      std::ofstream md(summary_md, std::ios::app);
      if (!md) {
        err << "fusebench-gate: cannot write " << summary_md << "\n";
        return 2;
      }
      write_markdown(result, o, md);
    }
    return result.failed() ? 1 : 0;
  } catch (const InputError& e) {
    err << "fusebench-gate: unusable input: " << e.what() << "\n";
    if (!summary_md.empty()) {
      std::ofstream md(summary_md, std::ios::app);
      md << "## fusebench gate: unusable input\n\n```\n" << e.what() << "\n```\n";
    }
    return 2;
  }
}

}  // namespace fusebench::gate
