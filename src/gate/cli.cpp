// fusebench-gate's command line, kept in the library so tests drive it without a subprocess.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>

#include "fusebench/advise.hpp"
#include "fusebench/gate.hpp"
#include "fusebench/input_files.hpp"
#include "fusebench/output_path.hpp"
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

// --allow-identity-mismatch=FIELD[,FIELD]: each a timing identity field, or "all".
std::set<std::string> parse_identity_fields(const std::vector<std::string>& values) {
  // The reports' timing identity fields, and the entries' own (moe routing, quant spec).
  std::vector<std::string> valid = advise::timing_identity_fields();
  valid.insert(valid.end(), entry_setup_groups().begin(), entry_setup_groups().end());
  std::set<std::string> out;
  for (const auto& value : values) {
    std::size_t start = 0;
    while (start <= value.size()) {
      const std::size_t end = std::min(value.find(',', start), value.size());
      const std::string name = value.substr(start, end - start);
      start = end + 1;
      if (name == "all") {
        out.insert(valid.begin(), valid.end());
        continue;
      }
      if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
        std::string names;
        for (const auto& v : valid) names += (names.empty() ? "" : ", ") + v;
        throw InputError("--allow-identity-mismatch: \"" + name +
                         "\" is not an identity field that changes timing (valid: " + names +
                         ", all)");
      }
      out.insert(name);
    }
  }
  return out;
}

// Appends, as GitHub's step summary expects several writers; a failed write (a full disk,
// /dev/full) is an error naming the path, never a silent pass.
struct SummaryWriteError : InputError {
  using InputError::InputError;
};
void append_md(const OutputTarget& target, const std::string& text) {
  try {
    append_output(target, text);
  } catch (const std::exception& e) {
    throw SummaryWriteError("--summary-md: " + std::string(e.what()));
  }
}

void write_md(const OutputTarget& target, const Result& result, const Options& o) {
  std::ostringstream md;
  write_markdown(result, o, md);
  append_md(target, md.str());
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "fusebench-gate: compares CURRENT against BASELINE (docs/gate.md). Exit 0 PASS, 1 FAIL (a "
      "regression), 2 unusable input or a refused comparison, 3 NOT JUDGED (something was not "
      "judged; --allow-unjudged passes it)."};
  std::string baseline_path, current_path, summary_md;
  Options o;
  std::string time_pct, noise_sigmas = "2", bytes_pct = "2", exact_pct = "0";
  bool verbose = false;
  app.add_option("BASELINE", baseline_path, "baseline report (JSON)")->required();
  app.add_option("CURRENT", current_path, "current report (JSON)")->required();
  app.add_option("--time-threshold", time_pct,
                 "percent change the time rule reports: SLOWER (fails) when the time ratio's "
                 "whole 95% interval lies above 1 + PCT/100 [default: 5 for GPU reports, 15 when "
                 "either report is from the CPU backend (docs/gate.md, \"Thresholds\")]")
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
               "compare reports from different devices or backends");
  std::vector<std::string> identity_allowed;
  app.add_option("--allow-identity-mismatch", identity_allowed,
                 "compare although this identity field differs (cores, driver, cuda, cublas, "
                 "nccl, onednn, openblas, build_type, device, backend; an entry's routing or "
                 "quant; or all; repeatable, comma-separated)")
      ->type_name("FIELD");
  bool require_baseline = false;
  app.add_flag("--require-baseline", require_baseline,
               "a missing BASELINE file is an error (exit 2), not NOT JUDGED (exit 3)");
  app.add_flag("--allow-unjudged", o.allow_unjudged,
               "NOT JUDGED exits 0 (the summary still says NOT JUDGED and why)");
  app.add_flag("--allow-new", o.allow_new,
               "entries of CURRENT that BASELINE lacks are notes, not failures");
  app.add_flag("--allow-thread-mismatch", o.allow_thread_mismatch,
               "judge time, speedup and advice although the reports ran with different CPU "
               "thread counts (context.cpu_threads)");
  app.add_flag("--allow-missing-counters", o.allow_missing_counters,
               "a counter in BASELINE but absent in CURRENT is a note, not a failure");
  app.add_flag("--ignore-time", o.ignore_time,
               "gate counters only (no time, speedup or advice rule)");
  std::string quant_error_pct = "10";
  app.add_option("--quant-error-threshold", quant_error_pct,
                 "percent growth of a shard's quant_error (or quant_error_vs_split) over the "
                 "baseline's that fails the accuracy rule (ACCURACY), beyond an absolute 1e-4")
      ->type_name("PCT")
      ->capture_default_str();
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
  reset_file_registry();  // one call is one run (tests play several in one process)
  OutputTarget md_target;
  try {
    // Before anything is read or written: no output may be an input (issues 27, 37).
    register_input("the baseline report", baseline_path);
    register_input("the current report", current_path);
    if (!summary_md.empty()) md_target = check_output(summary_md, "--summary-md");
  } catch (const std::invalid_argument& e) {
    err << "fusebench-gate: refused: " << e.what() << "\n";
    return kExitUnusable;
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
    o.quant_error_threshold = parse_non_negative(quant_error_pct, "--quant-error-threshold",
                                                 "a percentage, e.g. 10 for 10%") /
                              100;
    o.allow_identity = parse_identity_fields(identity_allowed);
    // Each file is read once; the gate and the advisor read their entries from the same text.
    std::error_code ec;
    // An error other than "absent" (e.g. a permission) is left to the reader to name.
    const bool have_baseline = std::filesystem::exists(baseline_path, ec) || ec;
    // The baseline first, so its errors are named first (the order of the command line).
    const std::string baseline_text =
        have_baseline ? advise::read_report_file(baseline_path) : std::string();
    const std::string current_text = advise::read_report_file(current_path);
    const Report current = parse_report(current_text, current_path);
    if (!have_baseline) {
      if (require_baseline) {
        throw InputError(baseline_path +
                         ": no baseline (--require-baseline): make one on this device with "
                         "scripts/update-baseline.sh and commit it");
      }
      const Result result = no_baseline_result(baseline_path, current, o);
      print_table(result, out, verbose);
      if (!summary_md.empty()) write_md(md_target, result, o);
      return result.exit_code();
    }
    const Report baseline = parse_report(baseline_text, baseline_path);
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
    if (!summary_md.empty()) write_md(md_target, result, o);
    return result.exit_code();
  } catch (const SummaryWriteError& e) {
    err << "fusebench-gate: error: " << e.what() << "\n";
    return kExitUnusable;
  } catch (const InputError& e) {
    err << "fusebench-gate: unusable input: " << e.what() << "\n";
    if (!summary_md.empty()) {
      try {
        append_md(md_target,
                  "## fusebench gate: unusable input\n\n```\n" + std::string(e.what()) + "\n```\n");
      } catch (const SummaryWriteError& failed) {
        err << "fusebench-gate: " << failed.what() << "\n";
      }
    }
    return kExitUnusable;
  }
}

}  // namespace fusebench::gate
