// TP or EP (issue 40, fusebench/ep_advice.hpp) on synthetic tp_moe reports: per token count the
// fastest variant, measured where the paired intervals decide it, else the cost model's
// prediction labelled modelled, and the crossover between them.
#include <gtest/gtest.h>

#include "fusebench/advise.hpp"
#include "fusebench/ep_advice.hpp"
#include "report_fixtures.hpp"

using nlohmann::json;
using namespace fusebench::advise;
using namespace fusebench::test;

namespace {

Fixture tp_moe_fixture(int tp = 2, const std::string& comm = "inprocess") {
  Fixture f;
  f.op = "tp_moe";
  f.model = "qwen3-30b-a3b";
  f.layer = "expert";
  f.dtype = "bf16";
  f.tp = tp;
  f.comm = comm;
  return f;
}

// tp and ep_ar at `tokens`: ep_ar's paired speedup over tp as given, each with the cost model's
// pipeline seconds (moe_ranks.predicted), `extra` on both.
void add_tp_ep(json& benches, const Fixture& f, std::int64_t tokens, double s, double lo, double hi,
               double tp_s, double ep_s, json extra = json::object()) {
  extra["speedup_baseline"] = "tp";
  json tp = entry(f, "tp", tokens, extra);
  tp["speedup_over"] = {
      {"ep_ar", {{"speedup", 1 / s}, {"ci_low", 1 / hi}, {"ci_high", 1 / lo}, {"pairs", 30}}}};
  tp["moe_ranks"] = {{"predicted", {{"pipeline_seconds", tp_s}}}};
  json ep = entry(f, "ep_ar", tokens, extra);
  ep["speedup"] = s;
  ep["speedup_ci_low"] = lo;
  ep["speedup_ci_high"] = hi;
  ep["speedup_pairs"] = 30;
  ep["speedup_over"] = {{"tp", {{"speedup", s}, {"ci_low", lo}, {"ci_high", hi}, {"pairs", 30}}}};
  ep["moe_ranks"] = {{"predicted", {{"pipeline_seconds", ep_s}}}};
  benches.push_back(tp);
  benches.push_back(ep);
}

Table table_of(const json& doc) {
  std::vector<Report> rs;
  rs.push_back(parse_report(doc.dump(), "ep.json"));
  return build(std::move(rs));
}

}  // namespace

// Measured at 1 and 1024 tokens (the intervals decide), contended at 16 and 256 (not judged: the
// model's prediction decides, labelled modelled); EP beats TP from 256 by the model.
TEST(AdviseEp, MeasuredWhereJudgedElseModelledAndTheCrossover) {
  json b = json::array();
  const Fixture f = tp_moe_fixture();
  const json contended = {{"timing_stop", "contended"}};
  add_tp_ep(b, f, 1, 0.70, 0.65, 0.75, 18e-6, 24e-6);
  add_tp_ep(b, f, 16, 1.30, 1.20, 1.40, 101e-6, 105e-6, contended);  // measured says ep_ar
  add_tp_ep(b, f, 256, 0.70, 0.60, 0.80, 153e-6, 147e-6, contended);
  add_tp_ep(b, f, 1024, 1.30, 1.20, 1.40, 205e-6, 181e-6);
  // tp 1 is no TP-or-EP question: left out.
  Fixture one = tp_moe_fixture(1, "");
  add_tp_ep(b, one, 1, 1.0, 0.99, 1.01, 1e-5, 1e-5);
  const Table t = table_of({{"context", context()}, {"benchmarks", b}});
  ASSERT_EQ(t.ep_vs_tp.size(), 1u);
  const EpAdvice& a = t.ep_vs_tp[0];
  EXPECT_EQ(a.key.tp, 2);
  ASSERT_EQ(a.points.size(), 4u);
  const std::vector<std::string> labels = {"measured: tp", "modelled: tp", "modelled: ep_ar",
                                           "measured: ep_ar"};
  for (std::size_t i = 0; i < labels.size(); ++i)
    EXPECT_EQ(a.points[i].label, labels[i]) << i << " " << a.points[i].reason;
  EXPECT_EQ(a.points[1].side, "tp");
  EXPECT_EQ(a.points[2].side, "ep");
  EXPECT_NE(a.points[1].reason.find("contended"), std::string::npos) << a.points[1].reason;
  EXPECT_NE(a.points[2].reason.find("ep_ar 147 us"), std::string::npos) << a.points[2].reason;
  ASSERT_EQ(a.crossovers.size(), 1u);
  EXPECT_EQ(a.crossovers[0].below, 16);
  EXPECT_EQ(a.crossovers[0].at, 256);
  EXPECT_EQ(a.crossovers[0].basis, "modelled");
  EXPECT_EQ(a.summary,
            "EP beats TP from 256 tokens (modelled: ep_ar; modelled: tp at 16; modelled)");
  // The outputs carry it.
  const json j = to_json(t);
  ASSERT_EQ(j["ep_vs_tp"].size(), 1u);
  EXPECT_EQ(j["ep_vs_tp"][0]["points"][3]["label"], "measured: ep_ar");
  EXPECT_EQ(j["ep_vs_tp"][0]["crossovers"][0]["tokens_at"], 256);
  EXPECT_EQ(j["ep_vs_tp"][0]["points"][0]["predicted_seconds"]["ep_ar"], 24e-6);
  const std::string md = to_markdown(t);
  EXPECT_NE(md.find("## TP or EP (tp_moe)"), std::string::npos) << md;
  EXPECT_NE(md.find("| 256 | modelled: ep_ar | ep |"), std::string::npos) << md;
}

// Two EP variants each beat tp beyond the margin but straddle it between themselves: no single
// fastest variant, yet the side is measured (EP), and the crossover from a measured TP point is
// measured too.
TEST(AdviseEp, EpVariantsBeatingTpDecideTheSideWhenTheyTieAmongThemselves) {
  json b = json::array();
  const Fixture f = tp_moe_fixture();
  add_tp_ep(b, f, 1, 0.70, 0.65, 0.75, 18e-6, 24e-6);
  auto ratio = [](double s, double lo, double hi) {
    return json{{"speedup", s}, {"ci_low", lo}, {"ci_high", hi}, {"pairs", 30}};
  };
  const json base = {{"speedup_baseline", "tp"}};
  json tp = entry(f, "tp", 1024, base);
  tp["speedup_over"] = {{"ep_ar", ratio(1 / 1.30, 1 / 1.40, 1 / 1.20)},
                        {"ep_a2a", ratio(1 / 1.32, 1 / 1.42, 1 / 1.22)}};
  tp["moe_ranks"] = {{"predicted", {{"pipeline_seconds", 205e-6}}}};
  json ar = entry(f, "ep_ar", 1024, base);
  ar["speedup"] = 1.30;
  ar["speedup_ci_low"] = 1.20;
  ar["speedup_ci_high"] = 1.40;
  ar["speedup_pairs"] = 30;
  ar["speedup_over"] = {{"tp", ratio(1.30, 1.20, 1.40)}, {"ep_a2a", ratio(0.98, 0.90, 1.06)}};
  ar["moe_ranks"] = {{"predicted", {{"pipeline_seconds", 181e-6}}}};
  json a2a = entry(f, "ep_a2a", 1024, base);
  a2a["speedup"] = 1.32;
  a2a["speedup_ci_low"] = 1.22;
  a2a["speedup_ci_high"] = 1.42;
  a2a["speedup_pairs"] = 30;
  a2a["speedup_over"] = {{"tp", ratio(1.32, 1.22, 1.42)}, {"ep_ar", ratio(1.02, 0.94, 1.11)}};
  a2a["moe_ranks"] = {{"predicted", {{"pipeline_seconds", 195e-6}}}};
  for (const json& e : {tp, ar, a2a}) b.push_back(e);
  const Table t = table_of({{"context", context()}, {"benchmarks", b}});
  ASSERT_EQ(t.ep_vs_tp.size(), 1u);
  const EpAdvice& a = t.ep_vs_tp[0];
  ASSERT_EQ(a.points.size(), 2u);
  EXPECT_EQ(a.points[0].label, "measured: tp") << a.points[0].reason;
  EXPECT_EQ(a.points[1].label, "measured: EP (ep_a2a, ep_ar over tp)") << a.points[1].reason;
  EXPECT_EQ(a.points[1].basis, "measured");
  EXPECT_EQ(a.points[1].side, "ep");
  ASSERT_EQ(a.crossovers.size(), 1u);
  EXPECT_EQ(a.crossovers[0].basis, "measured");
  EXPECT_EQ(a.summary.rfind("EP beats TP from 1024 tokens", 0), 0u) << a.summary;
}

// Modelled communication is no measurement whatever its intervals say; a report without paired
// speedups (no comparison) is advised by the model alone; a report without tp_moe has none.
TEST(AdviseEp, ModelledCommunicationAndNoPairsFallBackToTheModel) {
  json b = json::array();
  add_tp_ep(b, tp_moe_fixture(4, "modelled"), 1, 1.5, 1.4, 1.6, 14e-6, 18e-6,
            {{"comm_modelled", 1}});
  json plain = json::array();
  for (const char* v : {"tp", "ep_ag_rs"}) {
    json e = entry(tp_moe_fixture(), v, 64);
    e["moe_ranks"] = {{"predicted", {{"pipeline_seconds", std::string(v) == "tp" ? 2e-5 : 1e-5}}}};
    plain.push_back(e);
  }
  for (const auto& e : plain) b.push_back(e);
  const Table t = table_of({{"context", context()}, {"benchmarks", b}});
  ASSERT_EQ(t.ep_vs_tp.size(), 2u);
  for (const auto& a : t.ep_vs_tp) {
    ASSERT_EQ(a.points.size(), 1u);
    EXPECT_EQ(a.points[0].basis, "modelled") << a.key.text();
    EXPECT_TRUE(a.crossovers.empty());
  }
  const EpAdvice& modelled_comm = t.ep_vs_tp[0].key.tp == 4 ? t.ep_vs_tp[0] : t.ep_vs_tp[1];
  EXPECT_EQ(modelled_comm.points[0].label, "modelled: tp");
  EXPECT_NE(modelled_comm.points[0].reason.find("modelled communication"), std::string::npos);
  const EpAdvice& unpaired = t.ep_vs_tp[0].key.tp == 2 ? t.ep_vs_tp[0] : t.ep_vs_tp[1];
  EXPECT_EQ(unpaired.points[0].label, "modelled: ep_ag_rs");
  EXPECT_EQ(unpaired.summary, "EP fastest at every decided count (64-64 tokens)");

  json dense = json::array();
  add_pair(dense, Fixture{}, 1, 1.2, 1.1, 1.3);
  const Table none = table_of({{"context", context()}, {"benchmarks", dense}});
  EXPECT_TRUE(none.ep_vs_tp.empty());
  EXPECT_FALSE(to_json(none).contains("ep_vs_tp"));
  EXPECT_EQ(to_markdown(none).find("TP or EP"), std::string::npos);
}

// A prediction that is not a number >= 0 is refused naming the field.
TEST(AdviseEp, BadPredictionIsRefusedNamingTheField) {
  json e = entry(tp_moe_fixture(), "tp", 1);
  e["moe_ranks"] = {{"predicted", {{"pipeline_seconds", "fast"}}}};
  try {
    table_of({{"context", context()}, {"benchmarks", json::array({e})}});
    FAIL() << "accepted";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("moe_ranks.predicted.pipeline_seconds"),
              std::string::npos)
        << err.what();
  }
}
