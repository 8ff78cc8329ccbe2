// fusebench-gate's command line, kept in the library so tests drive it without a subprocess.
#include <CLI/CLI.hpp>
#include <fstream>

#include "fusebench/advise.hpp"
#include "fusebench/gate.hpp"

namespace fusebench::gate {

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "fusebench-gate: compares CURRENT against BASELINE. Exit 0 pass, 1 regression, 2 unusable "
      "input."};
  std::string baseline_path, current_path, summary_md;
  Options o;
  double time_pct = o.time_threshold * 100, bytes_pct = o.bytes_tolerance * 100, exact_pct = 0;
  bool verbose = false;
  app.add_option("BASELINE", baseline_path, "baseline report (JSON)")->required();
  app.add_option("CURRENT", current_path, "current report (JSON)")->required();
  app.add_option("--time-threshold", time_pct,
                 "percent slower that may fail (also needs to exceed noise)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--noise-sigmas", o.noise_sigmas, "a slowdown must exceed this many combined CVs")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--bytes-tolerance", bytes_pct, "percent change allowed in measured byte counters")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--exact-tolerance", exact_pct,
                 "percent change allowed in exact counters (launches, kernels)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--allow-device-mismatch", o.allow_device_mismatch,
               "compare reports from different devices");
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
  o.time_threshold = time_pct / 100;
  o.bytes_tolerance = bytes_pct / 100;
  o.exact_tolerance = exact_pct / 100;
  try {
    const Report baseline = load_report(baseline_path);
    const Report current = load_report(current_path);
    Result result = compare(baseline, current, o);
    if (o.ignore_time) {
      result.advice.off = "--ignore-time (counters only)";
    } else {
      // The same code as fusebench-advise, one report per side (docs/gate.md).
      try {
        o.advice_margin = advise::parse_margin(advice_margin, "--advice-margin");
        compare_advice(advise::build({advise::load_report(baseline_path)}, o.advice_margin),
                       advise::build({advise::load_report(current_path)}, o.advice_margin), result);
      } catch (const advise::InputError& e) {
        throw InputError(e.what());
      }
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
