// fusebench-advise (docs/advise.md) on synthetic reports whose intervals the tests construct: the
// decisions, the ranges and their ends, what is never evidence, pooling, devices, bad input.
// tests/advise/test_advise_formats.py compiles the generated header and imports the module.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fusebench/advise.hpp"
#include "report_fixtures.hpp"

using nlohmann::json;
namespace fs = std::filesystem;
using namespace fusebench::advise;
using namespace fusebench::test;

namespace {

// The issue's report: fused wins at 1-64 tokens, loses at 1024-16384, within the margin at 256.
json must_show_report(const json& ctx = context()) {
  json b = json::array();
  const Fixture f;
  for (std::int64_t t : {1, 4, 16, 64}) add_pair(b, f, t, 1.20, 1.15, 1.25);
  add_pair(b, f, 256, 1.00, 0.99, 1.01);
  for (std::int64_t t : {1024, 4096, 16384}) add_pair(b, f, t, 0.80, 0.77, 0.83);
  return {{"context", ctx}, {"benchmarks", b}};
}

Table table_of(const std::vector<json>& reports, double margin = kDefaultMargin) {
  std::vector<Report> rs;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    std::string file = "r";
    file.append(std::to_string(i))
        .append(".json");  // not "r" + ...: GCC 12 -Wrestrict false positive
    rs.push_back(parse_report(reports[i].dump(), file));
  }
  return build(std::move(rs), margin);
}

struct Expected {
  std::int64_t low, high;
  std::string label, basis;
};

void expect_ranges(const Comparison& c, const std::vector<Expected>& want) {
  ASSERT_EQ(c.ranges.size(), want.size()) << to_json(Table{}).dump();
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(c.ranges[i].low, want[i].low) << i;
    EXPECT_EQ(c.ranges[i].high, want[i].high) << i;
    EXPECT_EQ(c.ranges[i].label, want[i].label) << i;
    EXPECT_EQ(c.ranges[i].basis, want[i].basis) << i;
  }
}

const std::vector<Expected> kMustShow = {{1, 64, "use: fused", "measured"},
                                         {65, 255, "unresolved", "not measured"},
                                         {256, 256, "either", "measured"},
                                         {257, 1023, "unresolved", "not measured"},
                                         {1024, 16384, "use: split", "measured"}};

}  // namespace

TEST(Advise, MustShowRanges) {
  const Table t = table_of({must_show_report()});
  ASSERT_EQ(t.comparisons.size(), 1u);
  const Comparison& c = t.comparisons[0];
  EXPECT_EQ(c.variants, (std::vector<std::string>{"split", "fused"}));
  expect_ranges(c, kMustShow);
  // Without ceilings the cost model is not evaluated, and the ends say so.
  EXPECT_NE(c.ranges[0].high_end.find(
                "measured point (no cost model (no report of this comparison has ceilings))"),
            std::string::npos)
      << c.ranges[0].high_end;
  EXPECT_EQ(c.ranges[0].points, (std::vector<std::int64_t>{1, 4, 16, 64}));
  EXPECT_NE(c.point(16)->reason.find("fused over split 1.200 [1.150, 1.250] > 1.030"),
            std::string::npos)
      << c.point(16)->reason;
  EXPECT_NE(c.point(256)->reason.find("within [0.971, 1.030]"), std::string::npos)
      << c.point(256)->reason;

  // JSON: versioned, each range with its evidence, device and revision.
  const json j = to_json(t);
  EXPECT_EQ(j["schema"], "fusebench-advice");
  EXPECT_EQ(j["version"], kSchemaVersion);
  const auto& ranges = j["comparisons"][0]["ranges"];
  ASSERT_EQ(ranges.size(), kMustShow.size());
  for (std::size_t i = 0; i < kMustShow.size(); ++i) {
    EXPECT_EQ(ranges[i]["tokens_low"], kMustShow[i].low);
    EXPECT_EQ(ranges[i]["tokens_high"], kMustShow[i].high);
    EXPECT_EQ(ranges[i]["label"], kMustShow[i].label);
    EXPECT_EQ(ranges[i]["device"], "cpu: AMD EPYC");
    EXPECT_EQ(ranges[i]["reports"][0]["git_revision"], "abc123");
  }
  EXPECT_EQ(ranges[0]["evidence"].size(), 4u);
  EXPECT_EQ(ranges[0]["evidence"][2]["tokens"], 16);
  EXPECT_EQ(ranges[0]["evidence"][2]["pairs"][0]["ci_low"], 1.15);
  EXPECT_EQ(ranges[0]["evidence"][2]["pairs"][0]["observations"][0]["entry"],
            name_of(Fixture{}, "fused", 16));
  EXPECT_EQ(ranges[4]["decision"], "use");
  EXPECT_EQ(ranges[4]["variants"], json::array({"split"}));

  // Markdown and the generated code carry the same ranges.
  const std::string md = to_markdown(t);
  for (const char* row :
       {"| 1-64 | **use: fused** | measured |",
        "| 65-255 | unresolved (default: split) | not measured |",
        "| 256 | **either** | measured |", "| 1024-16384 | **use: split** | measured |"}) {
    EXPECT_NE(md.find(row), std::string::npos) << row << "\n" << md;
  }
  const std::string cpp = to_cpp(t);
  EXPECT_NE(cpp.find("namespace cpu_amd_epyc::qwen3_0_6b::fp32_tp1_eager {"), std::string::npos)
      << cpp;
  EXPECT_NE(
      cpp.find(R"({"qkv", 1, 64, Decision::kUse, "fused", "use: fused", "measured", "split"})"),
      std::string::npos)
      << cpp;
  EXPECT_NE(
      cpp.find(
          R"({"qkv", 1024, 16384, Decision::kUse, "split", "use: split", "measured", "split"})"),
      std::string::npos);
  const std::string py = to_python(t);
  EXPECT_NE(py.find(R"((256, 256, "either", "split,fused", "either", "measured"))"),
            std::string::npos)
      << py;
}

TEST(Advise, RangeEndsAtTheCostModelCrossoverWhereItAgreesWithBothNeighbours) {
  // A cost model (ceilings + model counters) that gives fused its launch saving at small M and
  // lets it fade into the margin: it agrees at 64 (use: fused) and 256 (either), and not at 1024
  // (it says either, measured use: split).
  json r = must_show_report();
  r["context"]["ceilings"] = {{"peak_flops", 1e13}, {"bandwidth", 1e12}, {"source", "measured"}};
  const double N = 3072, K = 1024;
  auto counters = [&](const std::string& variant, double m) {
    const double reads = variant == "split" ? 3 : 1;
    return json{{"model_flops", 2 * m * N * K},
                {"model_bytes", 4 * (reads * m * K + N * K + m * N)},
                {"model_launches", variant == "split" ? 3.0 : 1.0}};
  };
  for (auto& e : r["benchmarks"]) {
    const json c = counters(e["variant"].get<std::string>(), e["tokens"].get<double>());
    e.update(c);
  }
  auto model_ratio = [&](double m) {  // split time / fused time, as docs/advise.md defines it
    auto secs = [&](const std::string& v) {
      const json c = counters(v, m);
      return std::max(c["model_flops"].get<double>() / 1e13,
                      c["model_bytes"].get<double>() / 1e12) +
             c["model_launches"].get<double>() * 1e-6;
    };
    return secs("split") / secs("fused");
  };
  const Table t = table_of({r});
  const Comparison& c = t.comparisons.at(0);
  ASSERT_EQ(c.ranges.size(), 4u) << to_markdown(t);
  const Range& fused = c.ranges[0];
  EXPECT_EQ(fused.label, "use: fused");
  EXPECT_EQ(fused.low, 1);
  EXPECT_GT(fused.high, 64);
  EXPECT_LT(fused.high, 256);
  EXPECT_GT(model_ratio(static_cast<double>(fused.high)), 1.03);
  EXPECT_LE(model_ratio(static_cast<double>(fused.high + 1)), 1.03);
  EXPECT_NE(fused.high_end.find("cost model crossover between " + std::to_string(fused.high) +
                                " and " + std::to_string(fused.high + 1)),
            std::string::npos)
      << fused.high_end;
  EXPECT_NE(fused.high_end.find("agrees with both neighbours"), std::string::npos);
  EXPECT_EQ(c.ranges[1].label, "either");
  EXPECT_EQ(c.ranges[1].low, fused.high + 1);
  EXPECT_EQ(c.ranges[1].high, 256);
  EXPECT_EQ(c.ranges[2].basis, "not measured");
  EXPECT_NE(c.ranges[1].high_end.find(
                "the cost model disagrees (it predicts either at 1024 tokens, measured "
                "use: split)"),
            std::string::npos)
      << c.ranges[1].high_end;
  EXPECT_EQ(c.ranges[3].low, 1024);
}

TEST(Advise, EntriesWithoutAnIntervalAreNeverEvidence) {
  json b = json::array();
  const Fixture f;
  // Four pairs: today's reports give [min, max] with a note; it is not taken as an interval.
  add_pair(b, f, 1, 1.40, 1.30, 1.50, 4,
           {{"speedup_ci_note", "4 values: [min, max], coverage 87.5%"}});
  // Three pairs under issue 19's contract: no interval fields at all.
  json split = entry(f, "split", 16), fused = entry(f, "fused", 16);
  fused["speedup"] = 1.5;
  fused["speedup_pairs"] = 3;
  fused["speedup_ci_note"] = "3 pairs: no 95% interval";
  fused["speedup_over"] = {{"split", {{"speedup", 1.5}, {"pairs", 3}}}};
  b.push_back(split);
  b.push_back(fused);
  add_pair(b, f, 64, 1.40, 1.30, 1.50, 30);
  const Table t = table_of({{{"context", context()}, {"benchmarks", b}}});
  const Comparison& c = t.comparisons.at(0);
  EXPECT_EQ(c.point(1)->decision, Decision::kUnresolved);
  EXPECT_NE(
      c.point(1)->reason.find("no interval: 4 pairs < 6 (4 values: [min, max], coverage 87.5%)"),
      std::string::npos)
      << c.point(1)->reason;
  EXPECT_EQ(c.point(16)->decision, Decision::kUnresolved);
  EXPECT_NE(c.point(16)->reason.find("no interval: 3 pairs < 6"), std::string::npos)
      << c.point(16)->reason;
  EXPECT_EQ(c.point(64)->label, "use: fused");
  expect_ranges(c, {{1, 16, "unresolved", "measured"},
                    {17, 63, "unresolved", "not measured"},
                    {64, 64, "use: fused", "measured"}});
}

TEST(Advise, ContendedEntriesAreNeverEvidence) {
  json b = json::array();
  const Fixture f;
  add_pair(b, f, 16, 1.40, 1.30, 1.50, 40,
           {{"timing_stop", "contended"}, {"samples_dropped_preempted", 7}});
  const Table t = table_of({{{"context", context()}, {"benchmarks", b}}});
  const Point* p = t.comparisons.at(0).point(16);
  EXPECT_EQ(p->decision, Decision::kUnresolved);
  EXPECT_NE(p->reason.find("contended (fused: timing_stop contended, 7 samples dropped preempted)"),
            std::string::npos)
      << p->reason;
  // A contended run pooled with a clean one: the clean one decides, the contended one is listed.
  json clean = json::array();
  add_pair(clean, f, 16, 1.20, 1.15, 1.25);
  const Table both = table_of({{{"context", context()}, {"benchmarks", b}},
                               {{"context", context()}, {"benchmarks", clean}}});
  const Point* q = both.comparisons.at(0).point(16);
  EXPECT_EQ(q->label, "use: fused");
  ASSERT_EQ(q->pairs.at(0).observations.size(), 2u);
  EXPECT_NE(q->pairs[0].observations[0].excluded.find("contended"), std::string::npos);
  EXPECT_TRUE(q->pairs[0].observations[1].excluded.empty());
  EXPECT_DOUBLE_EQ(q->pairs[0].low, 1.15);
}

TEST(Advise, ModelledCommunicationIsNeverEvidenceButIsShownLabelled) {
  Fixture f;
  f.op = "tp_mlp";
  f.layer = "dense";
  f.tp = 4;
  f.comm = "modelled";
  json b = json::array();
  for (std::int64_t t : {1, 16}) {
    json naive = entry(f, "naive", t, {{"comm_modelled", 1}, {"comm_bytes", 4096}});
    json paired = entry(f, "paired", t, {{"comm_modelled", 1}, {"comm_bytes", 4096}});
    paired["speedup"] = 1.3;
    paired["speedup_ci_low"] = 1.25;
    paired["speedup_ci_high"] = 1.35;
    paired["speedup_pairs"] = 50;
    b.push_back(naive);
    b.push_back(paired);
  }
  const Table t = table_of({{{"context", context()}, {"benchmarks", b}}});
  const Comparison& c = t.comparisons.at(0);
  EXPECT_TRUE(c.modelled);
  for (const auto& p : c.points) {
    EXPECT_EQ(p.decision, Decision::kUnresolved);
    EXPECT_EQ(p.label, "modelled: use: paired");
    EXPECT_NE(p.reason.find("modelled communication: not evidence"), std::string::npos) << p.reason;
  }
  ASSERT_EQ(c.ranges.size(), 1u);
  EXPECT_EQ(c.ranges[0].decision, Decision::kUnresolved);
  EXPECT_NE(
      to_cpp(t).find(
          R"({"tp_mlp/comm:modelled", 1, 16, Decision::kUnresolved, "naive", "modelled: use: paired")"),
      std::string::npos)
      << to_cpp(t);
  EXPECT_NE(to_markdown(t).find("**Modelled communication**"), std::string::npos);
}

TEST(Advise, FailedEntriesAreSkippedWithTheReason) {
  json b = json::array();
  const Fixture f;
  b.push_back(entry(f, "split", 16));
  b.push_back(
      entry(f, "fused", 16, {{"error_occurred", true}, {"error_message", "out of memory: 3 GiB"}}));
  add_pair(b, f, 64, 1.2, 1.15, 1.25);
  const Table t = table_of({{{"context", context()}, {"benchmarks", b}}});
  const Point* p = t.comparisons.at(0).point(16);
  EXPECT_EQ(p->decision, Decision::kUnresolved);
  EXPECT_EQ(p->reason, "only split ran here");
  ASSERT_EQ(p->skipped.size(), 1u);
  EXPECT_EQ(p->skipped[0], "fused in r0.json: error: out of memory: 3 GiB");
}

TEST(Advise, ReportsOfOneDeviceArePooledByTheHullOfTheirIntervals) {
  const Fixture f;
  json a = json::array(), b = json::array();
  add_pair(a, f, 1, 1.20, 1.15, 1.25);
  add_pair(b, f, 1, 1.10, 1.05, 1.12);
  add_pair(a, f, 16, 1.20, 1.15, 1.25);  // the second run disagrees: no decision
  add_pair(b, f, 16, 0.97, 0.95, 1.00);
  add_pair(a, f, 64, 1.20, 1.15, 1.25);  // measured by one run only
  const Table t = table_of({{{"context", context("AMD EPYC", "rev1")}, {"benchmarks", a}},
                            {{"context", context("AMD EPYC", "rev2")}, {"benchmarks", b}}});
  ASSERT_EQ(t.comparisons.size(), 1u);
  const Comparison& c = t.comparisons[0];
  EXPECT_EQ(c.reports, (std::vector<int>{0, 1}));
  const PairEvidence& one = c.point(1)->pairs.at(0);
  EXPECT_EQ(c.point(1)->label, "use: fused");
  EXPECT_DOUBLE_EQ(one.low, 1.05);
  EXPECT_DOUBLE_EQ(one.high, 1.25);
  EXPECT_DOUBLE_EQ(one.speedup, 1.15);
  EXPECT_EQ(one.pairs, 60);
  EXPECT_EQ(c.point(16)->decision, Decision::kUnresolved);
  EXPECT_EQ(c.point(16)->pairs.at(0).note,
            "the reports' intervals do not overlap (the runs disagree)");
  EXPECT_EQ(c.point(64)->label, "use: fused");
  // The range's evidence names both reports and their revisions.
  const json j = to_json(t);
  EXPECT_EQ(j["comparisons"][0]["ranges"][0]["reports"].size(), 2u);
  EXPECT_EQ(j["comparisons"][0]["ranges"][0]["reports"][1]["git_revision"], "rev2");
}

TEST(Advise, DifferentDevicesAreNeverPooled) {
  const Table t =
      table_of({must_show_report(context("AMD EPYC")), must_show_report(context("Intel Xeon"))});
  ASSERT_EQ(t.comparisons.size(), 2u);
  EXPECT_EQ(t.comparisons[0].key.device, "cpu: AMD EPYC");
  EXPECT_EQ(t.comparisons[1].key.device, "cpu: Intel Xeon");
  EXPECT_EQ(t.comparisons[0].reports, std::vector<int>{0});
  EXPECT_EQ(t.comparisons[1].reports, std::vector<int>{1});
  const std::string cpp = to_cpp(t);
  EXPECT_NE(cpp.find("namespace cpu_amd_epyc::qwen3_0_6b::fp32_tp1_eager"), std::string::npos);
  EXPECT_NE(cpp.find("namespace cpu_intel_xeon::qwen3_0_6b::fp32_tp1_eager"), std::string::npos);
  // A GPU report is its own device too.
  const Table g = table_of(
      {must_show_report(), must_show_report({{"backend", "cuda"}, {"gpu_name", "NVIDIA H200"}})});
  ASSERT_EQ(g.comparisons.size(), 2u);
  EXPECT_EQ(g.comparisons[1].key.device, "gpu: NVIDIA H200");
}

TEST(Advise, TpPipelinesChooseAmongAllVariants) {
  Fixture f;
  f.op = "tp_mlp";
  f.layer = "dense";
  f.tp = 2;
  f.comm = "inprocess";
  const std::vector<std::string> vars = {"naive", "paired", "sp", "overlap"};
  // Time per variant; every pair's interval is +-2% around the ratio.
  auto build_at = [&](std::int64_t t, std::map<std::string, double> time) {
    json out = json::array();
    for (const auto& v : vars) {
      json e = entry(f, v, t, {{"comm_bytes", 4096}, {"comm_modelled", 0}});
      for (const auto& w : vars) {
        if (w == v) continue;
        const double s = time[w] / time[v];
        e["speedup_over"][w] = {
            {"speedup", s}, {"ci_low", s * 0.98}, {"ci_high", s * 1.02}, {"pairs", 40}};
      }
      out.push_back(e);
    }
    return out;
  };
  json b = build_at(1, {{"naive", 10}, {"paired", 8}, {"sp", 9}, {"overlap", 9.5}});
  for (const auto& e : build_at(16, {{"naive", 10}, {"paired", 8}, {"sp", 8}, {"overlap", 9.5}}))
    b.push_back(e);
  const Table t = table_of({{{"context", context()}, {"benchmarks", b}}});
  const Comparison& c = t.comparisons.at(0);
  EXPECT_EQ(c.variants, vars);
  EXPECT_EQ(c.point(1)->label, "use: paired");
  EXPECT_EQ(c.point(16)->label, "either: paired, sp");
  EXPECT_EQ(c.model_note, "not evaluated: communication is not in the cost model");
}

TEST(Advise, MalformedReportsNameTheField) {
  struct Case {
    std::string text, message;
  };
  json bad_interval = must_show_report();
  bad_interval["benchmarks"][1]["speedup_ci_low"] = 1.4;
  bad_interval["benchmarks"][1]["speedup_ci_high"] = 1.2;
  json half = must_show_report();
  half["benchmarks"][1].erase("speedup_ci_high");
  json tokens = must_show_report();
  tokens["benchmarks"][0]["tokens"] = "many";
  json zero = must_show_report();
  zero["benchmarks"][0]["tokens"] = 0;
  json over = must_show_report();
  over["benchmarks"][0]["speedup_over"]["fused"]["ci_low"] = -1;
  const std::string fused1 = name_of(Fixture{}, "fused", 1),
                    split1 = name_of(Fixture{}, "split", 1);
  const std::vector<Case> cases = {
      {"{not json", "x.json: document: not valid JSON"},
      {"[]", "x.json: top level: expected an object"},
      {R"({"context": {}})", "x.json: benchmarks: missing"},
      {R"({"context": {}, "benchmarks": {}})", "x.json: benchmarks: expected an array, got {}"},
      {R"({"context": {"git_revision": 3}, "benchmarks": []})",
       "x.json: context.git_revision: expected a string, got 3"},
      {bad_interval.dump(), "x.json: benchmarks[1] (" + fused1 +
                                ").speedup_ci_low: 1.4 is greater than speedup_ci_high 1.2"},
      {half.dump(), "(" + fused1 + ").speedup_ci_high: missing while speedup_ci_low is present"},
      {tokens.dump(), "(" + split1 + ").tokens: expected a number, got \"many\""},
      {zero.dump(), "(" + split1 + ").tokens: 0 is not a positive integer"},
      {over.dump(), "(" + split1 + ").speedup_over.fused.ci_low: -1 is not positive"},
  };
  for (const auto& c : cases) {
    try {
      parse_report(c.text, "x.json");
      ADD_FAILURE() << "accepted: " << c.text.substr(0, 80);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

class AdviseCli : public ::testing::Test {
 protected:
  fs::path dir;
  std::string out, err;
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("fusebench_advise_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = (dir / name).string();
    std::ofstream(p) << text;
    return p;
  }
  int run(std::vector<std::string> args) {
    args.insert(args.begin(), "fusebench-advise");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream o, e;
    const int rc = run_cli(static_cast<int>(argv.size()), argv.data(), o, e);
    out = o.str();
    err = e.str();
    return rc;
  }
};

TEST_F(AdviseCli, WritesEachFormatAndRefusesBadFlags) {
  const std::string r = write("r.json", must_show_report().dump());
  EXPECT_EQ(run({r}), 0) << err;
  EXPECT_EQ(json::parse(out)["schema"], "fusebench-advice");
  const std::string md = (dir / "advice.md").string();
  EXPECT_EQ(run({r, "--format=markdown", "-o", md}), 0) << err;
  EXPECT_TRUE(out.empty());
  std::ifstream in(md);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("| 1-64 | **use: fused** |"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(md + ".tmp"));
  // A wider margin turns the 20% wins into `either`.
  EXPECT_EQ(run({r, "--format=markdown", "--margin=0.3"}), 0) << err;
  EXPECT_NE(out.find("| 1-16384 | **either** |"), std::string::npos) << out;

  EXPECT_EQ(run({r, "--format=xml"}), 2);
  EXPECT_NE(err.find("fusebench-advise: error: --format: unknown format \"xml\" (valid: json, "
                     "markdown, cpp, python)"),
            std::string::npos)
      << err;
  EXPECT_EQ(run({r, "--margin=abc"}), 2);
  EXPECT_NE(err.find("--margin: \"abc\" is not a number"), std::string::npos) << err;
  EXPECT_EQ(run({r, "--margin=1.5"}), 2);
  EXPECT_NE(err.find("--margin: 1.5 is outside [0, 1)"), std::string::npos) << err;
  EXPECT_EQ(run({r, "--margin=-0.01"}), 2);
  EXPECT_EQ(run({r, "--margin=0.03x"}), 2);
  EXPECT_EQ(run({(dir / "absent.json").string()}), 2);
  EXPECT_NE(err.find("absent.json: file: cannot be opened"), std::string::npos) << err;
  EXPECT_EQ(run({write("bad.json", "{")}), 2);
  EXPECT_NE(err.find("bad.json: document: not valid JSON"), std::string::npos) << err;
  EXPECT_EQ(run({}), 2);
  // The suite's one output rule (fusebench/output_path.hpp): missing directories are made, a
  // directory or a closed descriptor is refused naming it.
  EXPECT_EQ(run({r, "-o", (dir / "no" / "such" / "dir.md").string()}), 0) << err;
  EXPECT_TRUE(fs::exists(dir / "no" / "such" / "dir.md"));
  EXPECT_EQ(run({r, "-o", dir.string()}), 2);
  EXPECT_NE(err.find("-o=" + dir.string() + " is a directory"), std::string::npos) << err;
  EXPECT_EQ(run({r, "-o", "/dev/fd/987"}), 2);
  EXPECT_NE(err.find("descriptor 987 is not open"), std::string::npos) << err;
}

// Issue 27 item 5: the advisor refuses the bad reports the gate refuses
// (tests/test_gate_input.cpp).
TEST_F(AdviseCli, BadTimesAndDuplicateNamesAreRefusedNamingTheEntry) {
  for (const auto& [doc, message] : bad_time_reports()) {
    EXPECT_EQ(run({write("bad.json", doc)}), 2) << doc;
    EXPECT_NE(err.find(message), std::string::npos) << err << "\nwanted: " << message;
  }
}

// Issue 27 item 4: -o never replaces an input, however it is spelled.
TEST_F(AdviseCli, AnOutputThatIsAnInputIsRefusedBeforeAnythingIsWritten) {
  const std::string text = must_show_report().dump();
  const std::string r = write("r.json", text);
  const auto link = (dir / "link.json").string();
  fs::create_symlink(r, link);
  const std::string dotted = (dir / "." / "r.json").string();
  for (const std::string& o : {r, link, dotted}) {
    EXPECT_EQ(run({r, "-o", o}), 2) << o;
    EXPECT_NE(err.find("-o=" + o + " is an input report (" + r + ")"), std::string::npos) << err;
    EXPECT_EQ(fs::file_size(r), text.size()) << o;
  }
  // Its temporary file (OUTPUT.tmp.PID.N, created exclusively) never replaces an input either.
  const std::string tmp_input = write("a.json.tmp", text);
  EXPECT_EQ(run({tmp_input, "-o", (dir / "a.json").string()}), 0) << err;
  EXPECT_EQ(fs::file_size(tmp_input), text.size());
}

// Issue 28: pooling six runs of one setup gives at least the decisions one run gives wherever
// every run agrees, and more where their speedups agree although each interval straddles.
TEST(Advise, SixAgreeingRunsGiveAtLeastTheDecisionsOfOne) {
  const Fixture f;
  std::vector<json> runs;
  for (int i = 0; i < 6; ++i) {
    const double d = 0.01 * (i % 3) - 0.01;  // -1%, 0, +1%: run-to-run drift
    json b = json::array();
    add_pair(b, f, 1, 1.20 + d, 1.12 + d, 1.28 + d);   // every run: use: fused
    add_pair(b, f, 16, 0.90 + d, 0.84 + d, 0.95 + d);  // every run: use: split
    add_pair(b, f, 64, 0.93 + d, 0.85 + d, 1.04 + d);  // every run straddles, all below 1/1.03
    add_pair(b, f, 256, i % 2 ? 1.10 : 0.90, i % 2 ? 1.05 : 0.85,
             i % 2 ? 1.15 : 0.95);  // the runs disagree: no decision
    runs.push_back(
        {{"context", context("AMD EPYC", "rev" + std::to_string(i))}, {"benchmarks", b}});
  }
  const Table pooled = table_of(runs);
  ASSERT_EQ(pooled.comparisons.size(), 1u);
  const Comparison& c = pooled.comparisons[0];
  for (const auto& one : runs) {
    const Table single = table_of({one});
    for (const auto& p : single.comparisons[0].points) {
      bool all_agree = true;
      for (const auto& other : runs)
        all_agree = all_agree && table_of({other}).comparisons[0].point(p.tokens)->label == p.label;
      if (all_agree && p.decision != Decision::kUnresolved) {
        EXPECT_EQ(c.point(p.tokens)->label, p.label) << p.tokens;
      }
    }
  }
  EXPECT_EQ(c.point(1)->label, "use: fused");
  EXPECT_EQ(c.point(16)->label, "use: split");
  // Each run alone leaves 64 unresolved; the six runs' speedups all lie below 1/1.03.
  EXPECT_EQ(table_of({runs[0]}).comparisons[0].point(64)->label, "unresolved");
  EXPECT_EQ(c.point(64)->label, "use: split");
  EXPECT_EQ(c.point(64)->pairs.at(0).pooling, "median of 6 runs, order-statistic 95% interval");
  EXPECT_EQ(c.point(256)->decision, Decision::kUnresolved);
}

TEST(Advise, RunsOfDifferentThreadsOrLibrariesAreNeverPooled) {
  json one = must_show_report(context()), two = must_show_report(context());
  one["context"]["cpu_threads"] = {{"threads", 1}};
  two["context"]["cpu_threads"] = {{"threads", 2}};
  try {
    table_of({one, two});
    ADD_FAILURE() << "pooled 1-thread and 2-thread runs";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("r1.json: context.cpu_threads.threads: 2, but r0.json "
                                         "has 1 (threads): reports of one device are pooled only "
                                         "when they ran one setup"),
              std::string::npos)
        << e.what();
  }
  two["context"]["cpu_threads"] = {{"threads", 1}};
  two["context"]["cpu_gemm"] = {{"onednn", {{"version", "3.1"}}}};
  one["context"]["cpu_gemm"] = {{"onednn", {{"version", "2.6.3"}}}};
  EXPECT_THROW(table_of({one, two}), InputError);
}

TEST(Advise, UnresolvedRunsTheBaselineVariantInEveryFormat) {
  const Table t = table_of({must_show_report()});
  const json j = to_json(t);
  EXPECT_EQ(j["comparisons"][0]["default"], "split");
  EXPECT_EQ(j["comparisons"][0]["ranges"][1]["decision"], "unresolved");
  EXPECT_EQ(j["comparisons"][0]["ranges"][1]["variants"], json::array({"split"}));
  EXPECT_NE(to_markdown(t).find("| 65-255 | unresolved (default: split) | not measured |"),
            std::string::npos);
  const std::string cpp = to_cpp(t);
  EXPECT_NE(cpp.find("\"unresolved\", \"not measured\", \"split\"}"), std::string::npos) << cpp;
  const std::string py = to_python(t);
  EXPECT_NE(py.find("\"defaults\": {\n            \"qkv\": \"split\","), std::string::npos) << py;
}

// The shared "not judged" contract (fusebench/evidence.hpp): contended first, then the first count
// below 6; an absent count decides nothing. tests/advise/test_not_judged_contract.py holds
// Python's not_judged_reason to the same cases through the built gate.
TEST(Evidence, NotJudgedContract) {
  EXPECT_FALSE(not_judged("converged", {{"speedup_pairs", 6.0}, {"samples", 6.0}}));
  EXPECT_EQ(not_judged("contended", {{"speedup_pairs", 2.0}}).label(), "contended");
  const NotJudged few = not_judged("", {{"speedup_pairs", 30.0}, {"samples", 2.0}});
  EXPECT_EQ(few.label(), "n < 6");
  EXPECT_EQ(few.text(), "n < 6 (samples 2)");
  EXPECT_EQ(not_judged("", {{"speedup_pairs", 3.0}, {"samples", 2.0}}).text(),
            "n < 6 (speedup_pairs 3)");
  // A report entry's, as the shared reader reads it: a speedup_pairs that is not a number (and
  // no speedup, which would read it as a count) decides nothing.
  const json doc = {{"context", json::object()},
                    {"benchmarks",
                     {{{"name", "e"}, {"real_time", 1.0}, {"speedup_pairs", "3"}},
                      {{"name", "f"}, {"real_time", 1.0}, {"speedup_pairs", 3}, {"samples", 2}}}}};
  const std::vector<ReportEntry> entries = read_report_entries(doc, "r.json");
  EXPECT_FALSE(entries.at(0).not_judged);
  EXPECT_EQ(entries.at(1).not_judged.text(), "n < 6 (speedup_pairs 3)");
  EXPECT_FALSE(not_judged("", {{"pairs", std::nullopt}}));
  EXPECT_EQ(not_judged("", {{"pairs", 5.0}}).text(), "n < 6 (pairs 5)");
}

// Issue 30: the moe block's variants. per_expert is the baseline (speedup_baseline); grouped and
// padded are advised over the token counts like any fused variant: `use: grouped` from where the
// intervals say so.
namespace {

json moe_report(int seed = 1) {
  Fixture f;
  f.op = "moe";
  f.layer = "expert";
  f.model = "tiny-deepseek-v3";
  const std::vector<std::string> vars = {"per_expert", "per_expert_split", "grouped", "padded"};
  json b = json::array();
  for (std::int64_t t : {1, 16, 64, 256}) {
    // grouped loses at 1 token (its setup), wins from 64; padded wastes rows below 256.
    const std::map<std::string, double> time = {{"per_expert", 10},
                                                {"per_expert_split", 11.0},
                                                {"grouped", t < 16   ? 12.0
                                                            : t < 64 ? 10.0
                                                                     : 7.0},
                                                {"padded", t < 256 ? 30.0 : 8.0}};
    for (const auto& v : vars) {
      json e =
          entry(f, v, t,
                {{"speedup_baseline", "per_expert"},
                 {"moe", {{"routing", {{"routing", "router"}, {"seed", seed}, {"top_k", 4}}}}}});
      for (const auto& w : vars) {
        if (w == v) continue;
        const double s = time.at(w) / time.at(v);
        e["speedup_over"][w] = {
            {"speedup", s}, {"ci_low", s * 0.98}, {"ci_high", s * 1.02}, {"pairs", 40}};
      }
      b.push_back(e);
    }
  }
  return {{"context", context()}, {"benchmarks", b}};
}

}  // namespace

TEST(Advise, MoeUsesGroupedFromWhereItsIntervalsSaySo) {
  const Table t = table_of({moe_report()});
  ASSERT_EQ(t.comparisons.size(), 1u) << to_json(t).dump(1);
  const Comparison& c = t.comparisons[0];
  EXPECT_EQ(c.baseline, "per_expert");
  EXPECT_EQ(c.variants,
            (std::vector<std::string>{"per_expert", "grouped", "per_expert_split", "padded"}));
  EXPECT_EQ(c.point(1)->label, "use: per_expert");
  EXPECT_EQ(c.point(64)->label, "use: grouped");
  EXPECT_EQ(c.point(256)->label, "use: grouped");
  EXPECT_EQ(c.ranges.back().label, "use: grouped");
  EXPECT_EQ(c.ranges.back().low, 64);
  const std::string md = to_markdown(t);
  EXPECT_NE(md.find("## moe · tiny-deepseek-v3 · expert"), std::string::npos) << md;
  EXPECT_NE(md.find("| 64-256 | **use: grouped** |"), std::string::npos) << md;
}

TEST(Advise, MoeReportsOfAnotherRoutingAreNeverPooled) {
  EXPECT_NO_THROW(table_of({moe_report(1), moe_report(1)}));
  try {
    table_of({moe_report(1), moe_report(2)});
    ADD_FAILURE() << "pooled runs of seeds 1 and 2";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  ": moe.routing: routing router, seed 2, but r0.json has routing router, seed 1: "
                  "reports are pooled only when they routed alike"),
              std::string::npos)
        << e.what();
  }
}

// Issue 29: accuracy beside speed. A fused variant that is faster but less accurate says so in
// every output; one as accurate (the exact channelwise fusion) says nothing.
namespace {

json quant_report(double fused_q) {
  Fixture f;
  f.dtype = "fp8:tensor";
  json b = json::array();
  for (std::int64_t t : {1, 16}) {
    add_pair(b, f, t, 1.30, 1.25, 1.35);
    json& split = b[b.size() - 2];
    json& fused = b[b.size() - 1];
    split["quant_error"] = {{"q", 0.0361}, {"k", 0.0355}, {"v", 0.0358}};
    split["emulated"] = fused["emulated"] = true;
    fused["quant_error"] = {{"q", fused_q}, {"k", 0.0355}, {"v", 0.0358}};
    fused["quant_error_vs_split"] = {{"q", fused_q == 0.0361 ? 0.0 : 0.0123}, {"k", 0}, {"v", 0}};
  }
  return {{"context", context()}, {"benchmarks", b}};
}

}  // namespace

TEST(Advise, AFasterButLessAccurateFusedVariantSaysSo) {
  const Table t = table_of({quant_report(0.0412)});
  const Comparison& c = t.comparisons.at(0);
  EXPECT_EQ(c.point(16)->label, "use: fused");  // the decision is the speed's
  ASSERT_TRUE(c.accuracy.count("fused"));
  EXPECT_TRUE(c.accuracy.at("fused").less_accurate);
  EXPECT_FALSE(c.accuracy.at("split").less_accurate);
  const std::string caveat =
      "fused is less accurate than split: quant_error of shard q 0.0412 vs 0.0361 (+14.1%) at 1 "
      "tokens; quant_error_vs_split up to 0.0123";
  EXPECT_EQ(c.ranges.at(0).accuracy, caveat);
  const std::string md = to_markdown(t);
  EXPECT_NE(md.find("**use: fused** (" + caveat + ")"), std::string::npos) << md;
  EXPECT_NE(md.find("Accuracy (quant_error: rms error relative to the float64 reference, the "
                    "worst shard over the measured token counts): split 0.0361 (shard q); fused "
                    "0.0412 (shard q), vs split 0.0123, less accurate than split."),
            std::string::npos)
      << md;
  const json j = to_json(t);
  EXPECT_EQ(j["comparisons"][0]["ranges"][0]["accuracy"], caveat);
  EXPECT_EQ(j["comparisons"][0]["accuracy"]["fused"]["less_accurate"], true);
  EXPECT_EQ(j["comparisons"][0]["accuracy"]["fused"]["quant_error_max"], 0.0412);
  EXPECT_EQ(j["comparisons"][0]["emulated"], true);
  EXPECT_NE(md.find("**Emulated**: the quantized times are the backend's emulation"),
            std::string::npos)
      << md;

  // As accurate as split: no caveat, the summary still shows both.
  const Table same = table_of({quant_report(0.0361)});
  EXPECT_EQ(same.comparisons.at(0).ranges.at(0).accuracy, "");
  EXPECT_FALSE(same.comparisons.at(0).accuracy.at("fused").less_accurate);
  EXPECT_EQ(to_markdown(same).find("less accurate"), std::string::npos);
  // A report without quantized entries is not emulated.
  EXPECT_EQ(to_json(table_of({must_show_report()}))["comparisons"][0]["emulated"], false);
}

TEST(Advise, MalformedAccuracyNamesTheField) {
  json r = quant_report(0.0412);
  r["benchmarks"][1]["quant_error"]["q"] = -0.5;
  try {
    table_of({r});
    ADD_FAILURE() << "accepted a negative quant_error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "/manual_time).quant_error.q: -0.5 is not a relative error (a number >= 0)"),
              std::string::npos)
        << e.what();
  }
  r["benchmarks"][1]["quant_error"] = "small";
  EXPECT_THROW(table_of({r}), InputError);
}

// Issue 37: reports whose quant.spec differ are other experiments under one name: pooling them
// mixed their speedups (the gate refuses such a pair too).
TEST(Advise, ReportsOfAnotherQuantSpecAreNotPooled) {
  const auto with_spec = [](const std::string& spec) {
    json r = quant_report(0.0361);
    for (auto& b : r["benchmarks"]) b["quant"] = {{"spec", spec}};
    return r;
  };
  EXPECT_NO_THROW(table_of({with_spec("fp8:tensor"), with_spec("fp8:tensor")}));
  try {
    table_of({with_spec("fp8:tensor"), with_spec("fp8:channel")});
    ADD_FAILURE() << "pooled reports of two quant specs";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("quant.spec: fp8:channel, but r0.json has fp8:tensor"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(AdviseCli, Issue37HostileReportFilesAreRefused) {
  const std::string deep = write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(run({deep}), 2);
  EXPECT_NE(err.find("JSON nested deeper than 64 levels"), std::string::npos) << err;
  EXPECT_EQ(run({"/dev/zero"}), 2);
  EXPECT_NE(err.find("/dev/zero: file: is a character device"), std::string::npos) << err;
  const std::string r = write("r.json", must_show_report().dump());
  EXPECT_EQ(run({r, "-o", "/dev/full"}), 2) << out;
  EXPECT_NE(err.find("/dev/full"), std::string::npos) << err;
}
