// Issue 36: the gate and the advisor read a report's entries through one reader
// (fusebench/report_entry.hpp). One test per family of fields shows both tools see the same
// value; the malformed fields are refused by both with one message naming the field and value.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusebench/advise.hpp"
#include "fusebench/gate.hpp"
#include "fusebench/report_entry.hpp"
#include "gate_fixture.hpp"

namespace fusebench::test {
namespace {

namespace gate = fusebench::gate;
namespace advise = fusebench::advise;

const std::string kSplit = "qkv/split/model:m/tokens:16/tp:1/dtype:bf16/manual_time";
const std::string kFused = "qkv/fused/model:m/tokens:16/tp:1/dtype:bf16/manual_time";

// Both tools' readings of one document.
struct Both {
  gate::Report by_gate;
  advise::Report by_advise;
  explicit Both(const json& doc)
      : by_gate(gate::parse_report(doc.dump(), "r.json")),
        by_advise(advise::parse_report(doc.dump(), "r.json")) {}
  // The gate's entry of `name` and the advisor's repetition `repetition` of it.
  const gate::Entry& g(const std::string& name) const {
    const gate::Entry* e = by_gate.find(name);
    if (!e) throw std::runtime_error("the gate has no " + name);
    return *e;
  }
  const advise::Entry& a(const std::string& name, int repetition = 0) const {
    const auto& entries = by_advise.entries;
    const auto it = std::find_if(entries.begin(), entries.end(), [&](const auto& e) {
      return e.name == name && e.repetition == repetition;
    });
    if (it == entries.end()) throw std::runtime_error("the advisor has no " + name);
    return *it;
  }
};

// What each tool says of a report it refuses ("" where it reads it).
std::pair<std::string, std::string> refusals(const json& doc) {
  std::string gate_says, advise_says;
  try {
    gate::parse_report(doc.dump(), "r.json");
  } catch (const gate::InputError& e) {
    gate_says = e.what();
  }
  try {
    advise::parse_report(doc.dump(), "r.json");
  } catch (const advise::InputError& e) {
    advise_says = e.what();
  }
  return {gate_says, advise_says};
}

// `e` with `extra` on top.
json with(json e, const json& extra) {
  for (const auto& [k, v] : extra.items()) e[k] = v;
  return e;
}

json fused(const json& extra = json::object()) {
  return with(entry(kFused, 8,
                    {{"speedup", 1.25},
                     {"speedup_ci_low", 1.2},
                     {"speedup_ci_high", 1.3},
                     {"speedup_pairs", 40},
                     {"speedup_baseline", "split"}}),
              extra);
}

}  // namespace

TEST(ReportEntry, NameAndAxesAreOneReading) {
  json split = entry(kSplit, 10, {{"layer", "attention"}, {"tokens", 16}});
  const Both r(report({split, fused({{"model", "qwen3"}, {"tp", 2}})}));
  for (const std::string& name : {kSplit, kFused}) {
    const advise::ReportEntry &g = r.g(name).fields, &a = r.a(name);
    EXPECT_EQ(g.name, name);
    EXPECT_EQ(a.name, name);
    EXPECT_EQ(g.header.at, a.header.at);
    for (auto field :
         {&advise::ReportEntry::op, &advise::ReportEntry::variant, &advise::ReportEntry::model,
          &advise::ReportEntry::layer, &advise::ReportEntry::dtype, &advise::ReportEntry::backend})
      EXPECT_EQ(g.*field, a.*field) << name;
    EXPECT_EQ(g.tokens, a.tokens);
    EXPECT_EQ(g.tp, a.tp);
  }
  // The element's field wins over its name's segment; the backend falls back to the context's.
  EXPECT_EQ(r.a(kFused).model, "qwen3");
  EXPECT_EQ(r.a(kFused).tp, 2);
  EXPECT_EQ(r.a(kSplit).layer, "attention");
  EXPECT_EQ(r.a(kSplit).tokens, 16);
  EXPECT_EQ(r.g(kSplit).fields.backend, "cuda");
}

TEST(ReportEntry, TimesInTheirUnitAreOneReading) {
  const Both r(report({entry(kSplit, 2.5, {{"time_unit", "ms"}}), fused({{"time_unit", "s"}})}));
  EXPECT_EQ(r.g(kSplit).fields.ns_per_unit, 1e6);
  EXPECT_EQ(r.a(kSplit).ns_per_unit, 1e6);
  EXPECT_EQ(r.a(kSplit).real_time, 2.5);
  EXPECT_DOUBLE_EQ(r.g(kSplit).time_ns, 2.5e6);
  EXPECT_EQ(r.a(kFused).ns_per_unit, 1e9);
  EXPECT_DOUBLE_EQ(r.g(kFused).time_ns, 8e9);
}

TEST(ReportEntry, RepetitionsAndAggregatesAreOneReading) {
  auto rep = [](json e, int index, double us) {
    e["repetition_index"] = index;
    e["real_time"] = us;
    return e;
  };
  auto agg = [](const std::string& name, double value, const json& extra = json::object()) {
    return with(json{{"name", kFused + "_" + name},
                     {"run_name", kFused},
                     {"run_type", "aggregate"},
                     {"aggregate_name", name},
                     {"real_time", value},
                     {"time_unit", "us"}},
                extra);
  };
  const json doc =
      report({rep(fused(), 0, 8), rep(fused({{"speedup", 1.3}}), 1, 10), agg("mean", 9),
              agg("median", 9.5), agg("cv", 0.1, {{"aggregate_unit", "percentage"}})});
  const std::vector<advise::ReportEntry> all = advise::read_report_entries(doc, "r.json");
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[1].repetition, 1);
  EXPECT_EQ(all[2].aggregate, "mean");
  EXPECT_FALSE(all[2].fraction);
  EXPECT_TRUE(all[4].fraction);
  EXPECT_EQ(all[4].name, kFused);  // an aggregate's entry name is its run's
  const Both r(doc);
  // The advisor keeps the repetitions; the gate folds them with the aggregates, its fields the
  // first repetition's.
  EXPECT_EQ(r.by_advise.entries.size(), 2u);
  EXPECT_EQ(r.a(kFused, 1).speedup->speedup, 1.3);
  EXPECT_EQ(r.g(kFused).samples, 2);
  EXPECT_DOUBLE_EQ(r.g(kFused).time_ns, 9500);  // the median aggregate
  EXPECT_EQ(*r.g(kFused).rel_noise, 0.1);       // cv as a fraction
  EXPECT_EQ(r.g(kFused).fields.repetition, r.a(kFused, 0).repetition);
  EXPECT_EQ(r.g(kFused).fields.speedup->speedup, r.a(kFused, 0).speedup->speedup);
}

TEST(ReportEntry, SpeedupsAndIntervalsAreOneReading) {
  json f = fused({{"speedup_ci_note", "few pairs"}});
  f["speedup_over"] = {{"split", {{"speedup", 1.25}, {"ci_low", 1.2}, {"ci_high", 1.3}}}};
  const Both r(report({entry(kSplit, 10, {{"speedup", 1.0}}), f}));
  const advise::Ratio* g = r.g(kFused).speedup_interval();
  ASSERT_TRUE(g);
  ASSERT_TRUE(r.a(kFused).speedup);
  const advise::Ratio& a = *r.a(kFused).speedup;
  EXPECT_EQ(g->speedup, a.speedup);
  EXPECT_EQ(*g->low, 1.2);
  EXPECT_EQ(g->low, a.low);
  EXPECT_EQ(g->high, a.high);
  EXPECT_EQ(g->pairs, 40);
  EXPECT_EQ(g->pairs, a.pairs);
  EXPECT_EQ(r.g(kFused).fields.speedup_baseline, r.a(kFused).speedup_baseline);
  EXPECT_EQ(r.a(kFused).speedup_ci_note, "few pairs");
  EXPECT_EQ(r.g(kFused).fields.over.at("split").low, r.a(kFused).over.at("split").low);
  // A speedup without its interval: a ratio to both, no interval to the gate's speedup rule.
  EXPECT_FALSE(r.g(kSplit).speedup_interval());
  EXPECT_EQ(r.g(kSplit).fields.speedup->speedup, r.a(kSplit).speedup->speedup);
}

TEST(ReportEntry, CountersAndWhyUnavailableAreOneReading) {
  const Both r(report({fused({{"model_flops", 1e9},
                              {"model_bytes", 2e6},
                              {"comm_bytes", 0},
                              {"counters_unavailable", {{"dram_write_bytes", "no CUPTI"}}}})}));
  const advise::ReportEntry &g = r.g(kFused).fields, &a = r.a(kFused);
  EXPECT_EQ(g.counters, a.counters);
  EXPECT_EQ(a.counter("model_flops"), 1e9);
  EXPECT_EQ(g.counter("launches"), 3.0);
  EXPECT_FALSE(g.counter("iterations"));  // Google Benchmark's structural fields are no counters
  EXPECT_FALSE(g.counter("real_time"));
  EXPECT_EQ(g.counters_unavailable, a.counters_unavailable);
  EXPECT_EQ(a.counters_unavailable.at("dram_write_bytes"), "no CUPTI");
}

TEST(ReportEntry, AccuracyAndSetupAreOneReading) {
  const Both r(report({fused({{"quant_error", {{"q", 0.03}, {"k", 0.02}}},
                              {"quant_error_vs_split", {{"q", 0.001}}},
                              {"quant", {{"spec", "int8:channel"}}},
                              {"emulated", true},
                              {"moe", {{"routing", {{"routing", "uniform"}, {"seed", 3}}}}}})}));
  const advise::ReportEntry &g = r.g(kFused).fields, &a = r.a(kFused);
  EXPECT_EQ(g.accuracy, a.accuracy);
  EXPECT_EQ(a.quant_error().at("k"), 0.02);
  EXPECT_EQ(g.quant_error_vs_split(), a.quant_error_vs_split());
  EXPECT_EQ(g.setup, a.setup);
  EXPECT_EQ(g.quant_spec, "int8:channel");
  EXPECT_TRUE(g.emulated);
  EXPECT_EQ(a.routing, "routing uniform, seed 3");
}

TEST(ReportEntry, ContentionAndHostLoadAreOneReading) {
  const Both r(report({fused({{"timing_stop", "contended"},
                              {"samples_dropped_preempted", 12},
                              {"host_wait_fraction", 0.25},
                              {"contended", 1}}),
                       entry(kSplit, 10, {{"samples", 3}, {"timing_stop", "converged"}})}));
  const advise::ReportEntry &g = r.g(kFused).fields, &a = r.a(kFused);
  EXPECT_EQ(g.timing_stop, "contended");
  EXPECT_EQ(g.timing_stop, a.timing_stop);
  EXPECT_EQ(g.samples_dropped_preempted, a.samples_dropped_preempted);
  EXPECT_EQ(g.counter("host_wait_fraction"), a.counter("host_wait_fraction"));
  EXPECT_EQ(g.counter("contended"), 1);
  EXPECT_EQ(g.not_judged.label(), "contended");
  EXPECT_EQ(a.not_judged.label(), "contended");
  EXPECT_EQ(r.g(kSplit).fields.not_judged.text(), "n < 6 (samples 3)");
  EXPECT_EQ(r.a(kSplit).not_judged.text(), r.g(kSplit).fields.not_judged.text());
}

TEST(ReportEntry, ErrorsAreOneReading) {
  const Both r(report({entry(kSplit, 10, {{"error_occurred", true}, {"error_message", "OOM"}})}));
  EXPECT_TRUE(r.g(kSplit).error);
  EXPECT_EQ(r.g(kSplit).error_message, "OOM");
  EXPECT_TRUE(r.a(kSplit).header.error);
  EXPECT_EQ(r.a(kSplit).header.error_message, "OOM");
}

// Each malformed field: both tools refuse the report with the same message, naming the element,
// the field and the value.
TEST(ReportEntry, MalformedFieldsAreRefusedByBothNamingTheField) {
  const std::string at = "r.json: benchmarks[0] (" + kFused + ").";
  json half = fused();
  half.erase("speedup_ci_high");
  json no_speedup = fused();
  no_speedup.erase("speedup");
  json aggregate = fused();
  aggregate["run_type"] = "aggregate";
  struct Case {
    json entry;
    std::string says;
  };
  const std::vector<Case> cases = {
      {fused({{"time_unit", "weeks"}}),
       at + "time_unit: unknown time unit \"weeks\" (expected ns, us, ms or s)"},
      {fused({{"time_unit", 3}}), at + "time_unit: expected a string, got 3"},
      {fused({{"speedup", "1.3"}}), at + "speedup: expected a number, got \"1.3\""},
      {half, at + "speedup_ci_high: missing while speedup_ci_low is present"},
      {no_speedup, at + "speedup: missing while speedup_ci_low is present"},
      {fused({{"speedup_ci_low", 1.4}}),
       at + "speedup_ci_low: 1.4 is greater than speedup_ci_high 1.3"},
      {fused({{"speedup", 0}}), at + "speedup: 0 is not positive (a ratio of two times)"},
      {fused({{"speedup_pairs", 2.5}}), at + "speedup_pairs: 2.5 is not a count of pairs"},
      {fused({{"speedup_over", {{"split", 1.2}}}}),
       at + "speedup_over.split: expected an object, got 1.2"},
      {fused({{"speedup_over", {{"split", {{"ci_low", 1.1}, {"ci_high", 1.2}}}}}}),
       at + "speedup_over.split.speedup: missing while ci_low is present"},
      {fused({{"speedup_baseline", 1}}), at + "speedup_baseline: expected a string, got 1"},
      {fused({{"tokens", "many"}}), at + "tokens: expected a number, got \"many\""},
      {fused({{"tp", 0}}), at + "tp: 0 is not a positive integer"},
      {fused({{"op", 3}}), at + "op: expected a string, got 3"},
      {fused({{"timing_stop", true}}), at + "timing_stop: expected a string, got true"},
      {fused({{"model_flops", "many"}}), at + "model_flops: expected a number, got \"many\""},
      {fused({{"repetition_index", "0"}}), at + "repetition_index: expected a number, got \"0\""},
      {fused({{"quant_error", {{"q", -1.0}}}}),
       at + "quant_error.q: -1 is not a relative error (a number >= 0)"},
      {aggregate, at + "aggregate_name: missing or not a string on an aggregate entry"},
  };
  for (const Case& c : cases) {
    const auto [gate_says, advise_says] = refusals(report({c.entry}));
    EXPECT_EQ(gate_says, c.says) << c.entry.dump();
    EXPECT_EQ(advise_says, gate_says) << c.entry.dump();
  }
}

}  // namespace fusebench::test
