// Expert placement under expert parallelism (issue 40): vLLM's determine_expert_map (linear,
// round_robin), DeepSeek's EPLB replicas and packing, and the per-rank load of a routing.
#include <gtest/gtest.h>

#include "error_of.hpp"
#include "fusebench/expert_placement.hpp"

namespace {

using namespace fusebench;

std::vector<std::vector<std::int64_t>> logical_by_rank(const ExpertPlacement& p) {
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(p.ranks));
  for (int r = 0; r < p.ranks; ++r)
    for (const auto q : p.on_rank(r))
      out[static_cast<std::size_t>(r)].push_back(p.logical_of[static_cast<std::size_t>(q)]);
  return out;
}

// top_k 1: token t routed to ids[t].
RoutingAssignment by_hand(std::int64_t experts, const std::vector<std::int32_t>& ids) {
  RoutingAssignment a;
  a.tokens = static_cast<std::int64_t>(ids.size());
  a.experts = experts;
  a.top_k = 1;
  a.expert_ids = ids;
  a.weights.assign(ids.size(), 1.0f);
  index_by_expert(a);
  return a;
}

// 100 tokens on expert 0, 10 on each of experts 1..7.
RoutingAssignment hot_expert() {
  std::vector<std::int32_t> ids(100, 0);
  for (std::int32_t e = 1; e < 8; ++e) ids.insert(ids.end(), 10, e);
  return by_hand(8, ids);
}

TEST(ExpertPlacement, LinearAndRoundRobinMatchVllmDetermineExpertMap) {
  // vLLM: E = 10 over 4 ranks, base 2, remainder 2: ranks 0 and 1 hold 3 experts.
  const auto linear = place_experts(10, 4, PlacementStrategy::linear);
  EXPECT_EQ(logical_by_rank(linear),
            (std::vector<std::vector<std::int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7}, {8, 9}}));
  const auto rr = place_experts(10, 4, PlacementStrategy::round_robin);
  EXPECT_EQ(logical_by_rank(rr),
            (std::vector<std::vector<std::int64_t>>{{0, 4, 8}, {1, 5, 9}, {2, 6}, {3, 7}}));
  EXPECT_EQ(linear.redundant, 0);
  for (const auto& reps : rr.replicas) EXPECT_EQ(reps.size(), 1u);
  EXPECT_EQ(parse_placement("round_robin"), PlacementStrategy::round_robin);
  EXPECT_NE(error_of([] { parse_placement("striped"); }).find("striped"), std::string::npos);
  EXPECT_NE(error_of([] { place_experts(2, 4, PlacementStrategy::linear); }).find("ep=4"),
            std::string::npos);
}

TEST(ExpertPlacement, RankLoadCountsRowsTokensAndTheSlowestRank) {
  const auto a = hot_expert();
  const auto p = place_experts(8, 4, PlacementStrategy::linear);
  const RankLoad l = rank_load(a, p);
  EXPECT_EQ(l.rows, (std::vector<std::int64_t>{110, 20, 20, 20}));
  EXPECT_EQ(l.tokens, l.rows);  // top-1: one slot per token
  EXPECT_EQ(l.experts, (std::vector<std::int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(l.active_experts, (std::vector<std::int64_t>{2, 2, 2, 2}));
  EXPECT_DOUBLE_EQ(l.mean_rows, 42.5);
  EXPECT_DOUBLE_EQ(l.imbalance, 110 / 42.5);
  EXPECT_EQ(l.slowest, 0);
  // Round robin puts expert 0 with expert 4 on rank 0: the same rows there.
  EXPECT_EQ(rank_load(a, place_experts(8, 4, PlacementStrategy::round_robin)).rows[0], 110);
}

TEST(ExpertPlacement, EplbReplicatesTheHotExpertAndPacksTheRanks) {
  const auto a = hot_expert();
  const auto p = eplb_placement(a.rows_per_expert(), 4, 4);
  EXPECT_EQ(p.physical(), 12);
  EXPECT_EQ(p.redundant, 4);
  // Every redundant replica goes to expert 0 (100/5 = 20 still above 10).
  EXPECT_EQ(p.replicas[0].size(), 5u);
  for (std::size_t e = 1; e < 8; ++e) EXPECT_EQ(p.replicas[e].size(), 1u);
  const RankLoad l = rank_load(a, p);
  // Slot s of expert 0 goes to replica s mod 5: 20 rows each; packed heaviest first.
  EXPECT_EQ(l.rows, (std::vector<std::int64_t>{50, 40, 40, 40}));
  EXPECT_EQ(l.experts, (std::vector<std::int64_t>{3, 3, 3, 3}));
  EXPECT_DOUBLE_EQ(l.imbalance, 50 / 42.5);
  EXPECT_LT(l.imbalance, rank_load(a, place_experts(8, 4, PlacementStrategy::linear)).imbalance);
  const auto j = rank_load_json(l, p);
  EXPECT_EQ(j["strategy"], "eplb");
  EXPECT_EQ(j["slowest_rank"], 0);
}

TEST(ExpertPlacement, EplbRefusesPhysicalExpertsThatDoNotSplit) {
  const std::string why = error_of([] { eplb_placement(std::vector<std::int64_t>(8, 1), 4, 3); });
  EXPECT_NE(why.find("--redundant-experts=3"), std::string::npos) << why;
  EXPECT_NE(why.find("11 physical experts"), std::string::npos) << why;
  EXPECT_NE(error_of([] { eplb_placement(std::vector<std::int64_t>(8, 1), 4, -1); }).find("-1"),
            std::string::npos);
  // Zero redundant: every expert once, E/ranks per rank.
  const auto p = eplb_placement(std::vector<std::int64_t>(8, 1), 4, 0);
  EXPECT_EQ(p.physical(), 8);
}

}  // namespace
