// The regression gate's rules beside time through run_cli: the advice rule, the machine identity
// and the baseline, the accuracy rule, and what an entry measured that its name does not say.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "fusebench/advise.hpp"
#include "fusebench/gate.hpp"
#include "gate_fixture.hpp"

using fusebench::test::entry;
using fusebench::test::Gate;
using fusebench::test::kA;
using fusebench::test::report;
using fusebench::test::timed;
using nlohmann::json;

namespace {

// split and fused qkv of one model at `tokens`, fused's paired speedup with 40 pairs (evidence
// for the advice rule, docs/advise.md).
std::vector<json> advised(std::int64_t tokens, double s, double low, double high) {
  const std::string tail = "/model:qwen3-0.6b/layer:attention/tokens:" + std::to_string(tokens) +
                           "/tp:1/dtype:bf16/timing:batch";
  json split = entry("qkv/split" + tail, 10, {{"speedup_baseline", "split"}});
  json fused = entry("qkv/fused" + tail, 10,
                     {{"speedup", s},
                      {"speedup_ci_low", low},
                      {"speedup_ci_high", high},
                      {"speedup_pairs", 40},
                      {"speedup_baseline", "split"}});
  return {split, fused};
}

json advised_report(std::vector<std::vector<json>> points) {
  std::vector<json> all;
  for (auto& p : points) all.insert(all.end(), p.begin(), p.end());
  return report(all);
}

}  // namespace

TEST_F(Gate, AdviceThatFlippedFailsNamingTheComparisonAndTokens) {
  const auto md = (dir / "summary.md").string();
  // Baseline: use: fused at 16 tokens; current: use: split there (the speedup rule fails it too,
  // as LOST; the next test has a flip the speedup rule does not see).
  const json base = advised_report({advised(1, 1.2, 1.15, 1.25), advised(16, 1.2, 1.15, 1.25)});
  const json cur = advised_report({advised(1, 1.2, 1.15, 1.25), advised(16, 0.8, 0.77, 0.83)});
  EXPECT_EQ(run(base, cur, {"--summary-md", md}), 1) << out;
  EXPECT_NE(out.find("FLIPPED  qkv model:qwen3-0.6b layer:attention dtype:bf16 tp:1 timing:batch"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("tokens 16: use: fused -> use: split (the decision flipped)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("advice rule (a `use:` decision that flipped fails): 2 token count(s) of 1 "
                     "comparison(s) measured in both: 1 flipped, 0 other change(s)."),
            std::string::npos)
      << out;
  std::ifstream in(md);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(
      text.find("| FLIPPED | `qkv model:qwen3-0.6b layer:attention dtype:bf16 tp:1 timing:batch` | "
                "advice |"),
      std::string::npos)
      << text;
}

TEST_F(Gate, AdviceFlipFailsEvenWhereTheSpeedupRuleIsSilent) {
  // use: split (0.80) became use: fused (1.20): the speedup rose, so only the advice rule fails.
  const json base = advised_report({advised(64, 0.8, 0.77, 0.83), advised(256, 0.8, 0.77, 0.83)});
  const json cur = advised_report({advised(64, 1.2, 1.15, 1.25), advised(256, 1.2, 1.15, 1.25)});
  EXPECT_EQ(run(base, cur), 1) << out;
  EXPECT_EQ(out.find("LOST"), std::string::npos) << out;
  EXPECT_NE(out.find("tokens 64-256: use: split -> use: fused (the decision flipped)"),
            std::string::npos)
      << out;
}

TEST_F(Gate, AdviceChangesToOrFromEitherOrUnresolvedAreReportedNotFailed) {
  const json base = advised_report({advised(16, 1.2, 1.15, 1.25), advised(256, 1.0, 0.99, 1.01)});
  // 16: use: fused -> either (within the margin); 256: either -> unresolved (straddles).
  const json cur = advised_report({advised(16, 1.0, 0.99, 1.01), advised(256, 1.0, 0.95, 1.05)});
  EXPECT_EQ(run(base, cur), 1) << out;  // the 16-token speedup interval fell wholly below: LOST
  EXPECT_NE(out.find("LOST"), std::string::npos) << out;
  EXPECT_EQ(out.find("FLIPPED"), std::string::npos) << out;
  EXPECT_NE(out.find("tokens 16: use: fused -> either (reported, not failed)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("tokens 256: either -> unresolved (reported, not failed)"), std::string::npos)
      << out;
  // Without the LOST row the changes alone pass.
  const json cur2 = advised_report({advised(16, 1.2, 1.15, 1.25), advised(256, 1.0, 0.95, 1.05)});
  EXPECT_EQ(run(base, cur2), 0) << out;
  EXPECT_NE(out.find("0 flipped, 1 other change(s)"), std::string::npos) << out;
  // --ignore-time leaves the advice rule out too, and says so; a bad margin is unusable input.
  EXPECT_EQ(run(base, cur2, {"--ignore-time"}), 3) << out;  // counters only: NOT JUDGED
  EXPECT_NE(
      out.find("advice rule (a `use:` decision that flipped fails): not applied: --ignore-time"),
      std::string::npos)
      << out;
  EXPECT_EQ(run(base, cur2, {"--advice-margin=2"}), 2) << err;
  EXPECT_NE(err.find("--advice-margin: 2 is outside [0, 1)"), std::string::npos) << err;
  // The margin is the advisor's: under 0.25, 1.2 [1.15, 1.25] lies within it (either) and
  // 0.8 [0.77, 0.83] straddles it, so the flip of the first test is no flip (LOST still fails).
  const json fb = advised_report({advised(16, 1.2, 1.15, 1.25)});
  const json fc = advised_report({advised(16, 0.8, 0.77, 0.83)});
  EXPECT_EQ(run(fb, fc), 1) << out;
  EXPECT_NE(out.find("FLIPPED"), std::string::npos) << out;
  EXPECT_EQ(run(fb, fc, {"--advice-margin=0.25"}), 1) << out;
  EXPECT_EQ(out.find("FLIPPED"), std::string::npos) << out;
  EXPECT_NE(out.find("tokens 16: either -> unresolved (reported, not failed)"), std::string::npos)
      << out;
}

// Issue 28: the verdicts and what is compared besides the entries.

namespace {

json cpu_report(std::vector<json> entries, json extra_context = json::object()) {
  json r = report(entries);
  r["context"] = fusebench::test::context();
  r["context"]["num_cpus"] = 2;
  r["context"]["host_name"] = "vm";
  r["context"]["fusebench_version"] = "0.1.0";
  r["context"]["entry_naming_version"] = 1;
  r["context"]["cpu_threads"] = {{"threads", 1}};
  for (const auto& [k, v] : extra_context.items()) r["context"][k] = v;
  return r;
}

}  // namespace

TEST_F(Gate, NoBaselineIsNotJudgedOrAnErrorWhenRequired) {
  // Issue 28 case 3: a GPU runner that fell back to the CPU looks for cpu-*.json, absent.
  const json cur = cpu_report({timed(1000, 0.3, 0.02)});
  const std::string missing = (dir / "no-such-baseline.json").string();
  const std::string cur_path = write("cur.json", cur.dump());
  const auto md = (dir / "summary.md").string();
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "fusebench-gate");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream o, e;
    const int rc = fusebench::gate::run_cli(static_cast<int>(argv.size()), argv.data(), o, e);
    out = o.str();
    err = e.str();
    return rc;
  };
  EXPECT_EQ(cli({missing, cur_path, "--summary-md", md}), 3) << out << err;
  EXPECT_NE(out.find("NOT JUDGED (no baseline at " + missing), std::string::npos) << out;
  std::ifstream in(md);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("## fusebench gate: NOT JUDGED"), std::string::npos) << text;
  EXPECT_EQ(cli({missing, cur_path, "--require-baseline"}), 2) << out << err;
  EXPECT_NE(err.find(missing + ": no baseline (--require-baseline)"), std::string::npos) << err;
  // The GPU baseline against the CPU fallback's report: refused naming the backend.
  EXPECT_EQ(run(report({timed(1000, 0.3, 0.02)}), cur), 2) << err;
  EXPECT_NE(err.find("backend mismatch:"), std::string::npos) << err;
  EXPECT_NE(err.find("\"cuda\""), std::string::npos) << err;
}

TEST_F(Gate, MachineIdentityIsComparedPrintedAndRefusedNamingTheField) {
  // Issue 28 case 4: a baseline from a 64-CPU host is refused (cores change timing); another
  // host name or revision is shown, not refused.
  const json base = cpu_report({timed(1000, 0.3, 0.02)});
  const json other = cpu_report({timed(1000, 0.3, 0.02)}, {{"num_cpus", 64}});
  EXPECT_EQ(run(other, base), 2) << out;
  EXPECT_NE(err.find("cores mismatch: "), std::string::npos) << err;
  EXPECT_NE(err.find("(context.num_cpus) was measured with \"64\""), std::string::npos) << err;
  EXPECT_NE(err.find("--allow-identity-mismatch=cores"), std::string::npos) << err;
  EXPECT_EQ(run(other, base, {"--allow-identity-mismatch=cores"}), 0) << out << err;
  EXPECT_NE(out.find("cores: baseline 64, current 2 (DIFFERS: changes timing; allowed)"),
            std::string::npos)
      << out;
  EXPECT_EQ(run(other, base, {"--allow-identity-mismatch=colour"}), 2) << err;
  EXPECT_NE(err.find("\"colour\" is not an identity field that changes timing (valid: "),
            std::string::npos)
      << err;
  const json moved =
      cpu_report({timed(1000, 0.3, 0.02)}, {{"host_name", "ci-7"}, {"git_revision", "def456"}});
  const auto md = (dir / "summary.md").string();
  EXPECT_EQ(run(base, moved, {"--summary-md", md}), 0) << out << err;
  EXPECT_NE(out.find("  host: baseline vm, current ci-7 (differs)"), std::string::npos) << out;
  EXPECT_NE(out.find("  git_revision: baseline abc123, current def456 (differs)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  cores: 2 (both)"), std::string::npos) << out;
  std::ifstream in(md);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<details><summary>Identity: 2 field(s) differ"), std::string::npos) << text;
  EXPECT_NE(text.find("| host (differs) | vm | ci-7 |"), std::string::npos) << text;
  // On a GPU the driver and libraries change timing.
  json gb = report({entry(kA, 10)}), gc = report({entry(kA, 10)});
  gb["context"]["cuda_driver_version"] = 12080;
  gc["context"]["cuda_driver_version"] = 13000;
  EXPECT_EQ(run(gb, gc), 2) << out;
  EXPECT_NE(err.find("driver mismatch: "), std::string::npos) << err;
  gc["context"]["cuda_driver_version"] = 12080;
  gb["context"]["libraries"] = {{"cublaslt", "130100"}};
  gc["context"]["libraries"] = {{"cublaslt", "120900"}};
  EXPECT_EQ(run(gb, gc), 2) << out;
  EXPECT_NE(err.find("cublas mismatch: "), std::string::npos) << err;
}

TEST_F(Gate, RenamedEntriesAreNamedWithTheNamingVersions) {
  // Issue 28 case 5: a baseline of an older suite, whose names lack the layer segment.
  const std::string old_a = "qkv/split/model:m/tokens:1/tp:1/dtype:bf16/manual_time";
  const std::string new_a =
      "qkv/split/model:m/layer:attention/tokens:1/tp:1/dtype:bf16/manual_time";
  json base = report({entry(old_a, 10)});
  base["context"]["fusebench_version"] = "0.0.9";
  json cur = report({entry(new_a, 10)});
  cur["context"]["fusebench_version"] = "0.1.0";
  cur["context"]["entry_naming_version"] = 1;
  EXPECT_EQ(run(base, cur), 1) << out;
  EXPECT_NE(out.find("(renamed? the current report has " + new_a), std::string::npos) << out;
  EXPECT_NE(out.find("names: 1 entry MISSING and 1 NEW: the reports' entry naming versions differ "
                     "(context.entry_naming_version: baseline not recorded, older than version 1, "
                     "current 1)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("suite versions: baseline 0.0.9, current 0.1.0"), std::string::npos) << out;
  // Not the false "no entry of either report has a speedup interval".
  EXPECT_NE(out.find("speedup rule (a current interval wholly below the baseline's fails): not "
                     "applied: no entry is in both reports (see MISSING and NEW)"),
            std::string::npos)
      << out;
}

namespace {

const std::string kQSplit =
    "qkv/split/model:m/tokens:16/tp:1/dtype:fp8:tensor/weights:random/manual_time";
const std::string kQFused =
    "qkv/fused/model:m/tokens:16/tp:1/dtype:fp8:tensor/weights:random/manual_time";

json quant_entry(const std::string& name, double q, double vs_split = -1) {
  json extra = {{"quant", {{"spec", "fp8:tensor"}, {"dtype", "fp8_e4m3fn"}}},
                {"emulated", true},
                {"quant_error", {{"q", q}, {"k", 0.035}, {"v", 0.036}}},
                {"quant_error_rows", 16}};
  if (vs_split >= 0) extra["quant_error_vs_split"] = {{"q", vs_split}, {"k", 0.0}, {"v", 0.0}};
  return entry(name, 10, extra);
}

json quant_report(double fused_q, double fused_vs_split) {
  return report({quant_entry(kQSplit, 0.036), quant_entry(kQFused, fused_q, fused_vs_split)});
}

}  // namespace

TEST_F(Gate, QuantErrorThatGrewFailsNamingTheEntryAndShard) {
  const json base = quant_report(0.036, 0.0);
  EXPECT_EQ(run(base, base), 0) << out << err;
  EXPECT_NE(out.find("accuracy rule (a quant_error that grew fails): applied to 2 entries (9 "
                     "shard values), 0 grew"),
            std::string::npos)
      << out;

  // fused's q shard: 0.036 -> 0.050 (+38.9%).
  EXPECT_EQ(run(base, quant_report(0.050, 0.0), {"--summary-md=" + (dir / "s.md").string()}), 1)
      << out << err;
  std::string row;
  for (std::istringstream lines(out); std::getline(lines, row);) {
    if (row.rfind("ACCURACY", 0) == 0) break;
  }
  EXPECT_NE(row.find(kQFused), std::string::npos) << out;
  EXPECT_NE(row.find("quant_error.q"), std::string::npos) << row;
  EXPECT_NE(row.find("+38.9%: the quant_error of shard q grew beyond the threshold 10.0%"),
            std::string::npos)
      << row;
  EXPECT_NE(row.find("less accurate"), std::string::npos) << row;
  EXPECT_EQ(out.find("ACCURACY " + kQSplit), std::string::npos) << out;  // split did not change
  EXPECT_NE(out.find(": FAIL"), std::string::npos) << out;
  std::ifstream md(dir / "s.md");
  const std::string summary((std::istreambuf_iterator<char>(md)), {});
  EXPECT_NE(summary.find("| ACCURACY | `" + kQFused + "` | quant_error.q |"), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("Accuracy rule: applied to 2 entries"), std::string::npos) << summary;

  // The threshold is a flag; +38.9% passes a 50% threshold.
  EXPECT_EQ(run(base, quant_report(0.050, 0.0), {"--quant-error-threshold=50"}), 0) << out << err;
  EXPECT_NE(out.find("threshold 50.0%"), std::string::npos) << out;

  // An exact fusion that became lossy: quant_error_vs_split from 0 fails ...
  EXPECT_EQ(run(base, quant_report(0.036, 0.02)), 1) << out << err;
  EXPECT_NE(out.find("quant_error_vs_split.q"), std::string::npos) << out;
  EXPECT_NE(out.find("from 0: the quant_error_vs_split of shard q grew"), std::string::npos) << out;
  // ... but rounding below the absolute floor (1e-4) does not.
  EXPECT_EQ(run(base, quant_report(0.036, 5e-7)), 0) << out << err;

  // A smaller error is reported, not failed.
  EXPECT_EQ(run(base, quant_report(0.020, 0.0), {"-v"}), 0) << out << err;
  EXPECT_NE(out.find("more accurate (reported, not failed)"), std::string::npos) << out;
}

TEST_F(Gate, AccuracyIsJudgedWhenTimeIsNot) {
  // --ignore-time leaves the run NOT JUDGED (3), but an accuracy regression still fails (1).
  EXPECT_EQ(run(quant_report(0.036, 0.0), quant_report(0.036, 0.0), {"--ignore-time"}), 3) << out;
  EXPECT_EQ(run(quant_report(0.036, 0.0), quant_report(0.050, 0.0), {"--ignore-time"}), 1) << out;
  EXPECT_NE(out.find("ACCURACY"), std::string::npos) << out;
}

TEST_F(Gate, AccuracyThatVanishedIsMissing) {
  json cur = quant_report(0.036, 0.0);
  cur["benchmarks"][1].erase("quant_error_vs_split");
  EXPECT_EQ(run(quant_report(0.036, 0.0), cur), 1) << out << err;
  EXPECT_NE(out.find("quant_error_vs_split.q"), std::string::npos) << out;
  EXPECT_NE(out.find("accuracy absent from current"), std::string::npos) << out;
  EXPECT_EQ(run(quant_report(0.036, 0.0), cur, {"--allow-missing-counters"}), 0) << out << err;
}

// Issue 36: the gate and the advisor read an entry's accuracy and identity through one reader of
// the report's schema (advise::read_report_entries): the same values, one message for a malformed
// field; each keeps its own verdicts.
TEST(ReportSchema, GateAndAdvisorReadAnEntryThroughOneReader) {
  json r = quant_report(0.05, 0.01);
  r["benchmarks"][1]["moe"] = {{"routing", {{"routing", "zipf:1.2"}, {"seed", 7}}}};
  const fusebench::gate::Report g = fusebench::gate::parse_report(r.dump(), "r.json");
  const fusebench::advise::Report a = fusebench::advise::parse_report(r.dump(), "r.json");
  const fusebench::gate::Entry* ge = g.find(kQFused);
  ASSERT_NE(ge, nullptr);
  const auto ae = std::find_if(a.entries.begin(), a.entries.end(),
                               [](const auto& e) { return e.name == kQFused; });
  ASSERT_NE(ae, a.entries.end());
  EXPECT_EQ(ge->fields.accuracy.at("quant_error"), ae->quant_error());
  EXPECT_EQ(ge->fields.accuracy.at("quant_error_vs_split"), ae->quant_error_vs_split());
  EXPECT_EQ(ae->quant_error().at("q"), 0.05);
  EXPECT_EQ(ge->fields.setup.at("quant.spec"), "fp8:tensor");
  EXPECT_EQ(ae->quant_spec, "fp8:tensor");
  EXPECT_EQ(ge->fields.setup.at("emulated"), "true");
  EXPECT_TRUE(ae->emulated);
  EXPECT_EQ(ge->fields.setup.at("moe.routing.routing"), "zipf:1.2");
  EXPECT_EQ(ge->fields.setup.at("moe.routing.seed"), "7");
  EXPECT_EQ(ae->routing, "routing zipf:1.2, seed 7");
  for (const json& bad : {json{{"q", "big"}}, json{{"q", -1.0}}, json(0.3)}) {
    r["benchmarks"][1]["quant_error"] = bad;
    std::string gate_says, advise_says;
    try {
      fusebench::gate::parse_report(r.dump(), "r.json");
    } catch (const fusebench::gate::InputError& e) {
      gate_says = e.what();
    }
    try {
      fusebench::advise::parse_report(r.dump(), "r.json");
    } catch (const fusebench::advise::InputError& e) {
      advise_says = e.what();
    }
    EXPECT_NE(gate_says.find(".quant_error"), std::string::npos) << bad << ": " << gate_says;
    EXPECT_EQ(gate_says, advise_says) << bad;
  }
}

TEST_F(Gate, MalformedAccuracyIsUnusableInputNamingTheField) {
  const std::string at = "benchmarks[1] (" + kQFused + ")";
  struct Case {
    json value;
    std::string says;
  };
  for (const Case& c : {
           Case{json{{"q", -1.0}}, at + ".quant_error.q: -1 is not a relative error"},
           Case{json{{"q", "big"}}, at + ".quant_error.q: expected a number, got a string"},
           Case{json(0.3), at + ".quant_error: expected an object of shard -> error, got number"},
       }) {
    json cur = quant_report(0.036, 0.0);
    cur["benchmarks"][1]["quant_error"] = c.value;
    EXPECT_EQ(run(quant_report(0.036, 0.0), cur), 2) << c.value << out;
    EXPECT_NE(err.find(c.says), std::string::npos) << err;
  }
  EXPECT_EQ(
      run(quant_report(0.036, 0.0), quant_report(0.036, 0.0), {"--quant-error-threshold=abc"}), 2);
  EXPECT_NE(err.find("--quant-error-threshold: \"abc\" is not a valid value: expected a number >= "
                     "0 (a percentage, e.g. 10 for 10%)"),
            std::string::npos)
      << err;
}

// Issue 30: an entry's routing (source, seed) and a quantized entry's spec are part of what it
// measured though its name does not say them: another one under the same name is refused (2).
TEST_F(Gate, AnEntryOfAnotherRoutingOrQuantSpecIsRefusedNamingTheField) {
  const std::string moe =
      "moe/grouped/model:tiny/layer:expert/tokens:64/tp:1/dtype:fp32/weights:random/manual_time";
  auto moe_report = [&](const std::string& source, int seed) {
    return report({entry(
        moe, 10,
        {{"moe",
          {{"routing", {{"routing", source}, {"seed", seed}, {"experts", 16}, {"top_k", 4}}}}}})});
  };
  EXPECT_EQ(run(moe_report("router", 1), moe_report("router", 1)), 0) << out << err;
  EXPECT_EQ(run(moe_report("router", 1), moe_report("router", 2)), 2) << out;
  EXPECT_NE(err.find(moe + ": moe.routing.seed differs: "), std::string::npos) << err;
  EXPECT_NE(err.find("has 1, "), std::string::npos) << err;
  EXPECT_NE(err.find("--allow-identity-mismatch=routing"), std::string::npos) << err;
  EXPECT_EQ(run(moe_report("router", 1), moe_report("zipf:1.2", 1)), 2) << out;
  EXPECT_NE(err.find("moe.routing.routing differs"), std::string::npos) << err;
  EXPECT_EQ(
      run(moe_report("router", 1), moe_report("router", 2), {"--allow-identity-mismatch=routing"}),
      0)
      << out << err;
  EXPECT_NE(
      out.find("differs: baseline 1, current 2 (allowed by --allow-identity-mismatch=routing)"),
      std::string::npos)
      << out;

  json cur = quant_report(0.036, 0.0);
  cur["benchmarks"][1]["quant"]["spec"] = "fp8:tensor:static";
  EXPECT_EQ(run(quant_report(0.036, 0.0), cur), 2) << out;
  EXPECT_NE(err.find(kQFused + ": quant.spec differs"), std::string::npos) << err;
  EXPECT_NE(err.find("--allow-identity-mismatch=quant"), std::string::npos) << err;
  EXPECT_EQ(run(quant_report(0.036, 0.0), cur, {"--allow-identity-mismatch=quant"}), 0) << err;
}
