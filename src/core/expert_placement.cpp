// Expert placement under expert parallelism (include/fusebench/expert_placement.hpp): vLLM's
// determine_expert_map and DeepSeek's EPLB, and the per-rank load of a routing.
#include "fusebench/expert_placement.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace fusebench {

std::string_view to_string(PlacementStrategy s) {
  return s == PlacementStrategy::linear ? "linear" : "round_robin";
}

PlacementStrategy parse_placement(std::string_view value) {
  if (value == "linear") return PlacementStrategy::linear;
  if (value == "round_robin") return PlacementStrategy::round_robin;
  throw std::invalid_argument("--expert-placement=" + std::string(value) +
                              " is invalid (valid: linear, round_robin: vLLM's "
                              "expert_placement_strategy)");
}

std::vector<std::int64_t> ExpertPlacement::on_rank(int rank) const {
  std::vector<std::int64_t> out;
  for (std::int64_t p = 0; p < physical(); ++p)
    if (rank_of[static_cast<std::size_t>(p)] == rank) out.push_back(p);
  return out;
}

namespace {

void index_replicas(ExpertPlacement& p) {
  p.replicas.assign(static_cast<std::size_t>(p.experts), {});
  for (std::int64_t q = 0; q < p.physical(); ++q)
    p.replicas[static_cast<std::size_t>(p.logical_of[static_cast<std::size_t>(q)])].push_back(q);
}

void check_ranks(std::int64_t experts, int ranks) {
  if (ranks < 1)
    throw std::invalid_argument("expert parallelism over " + std::to_string(ranks) +
                                " ranks is invalid (must be >= 1)");
  if (experts < ranks)
    throw std::invalid_argument(
        "expert parallelism needs at least one expert per rank: " + std::to_string(experts) +
        " experts over ep=" + std::to_string(ranks) + " ranks");
}

}  // namespace

ExpertPlacement place_experts(std::int64_t experts, int ranks, PlacementStrategy strategy) {
  check_ranks(experts, ranks);
  ExpertPlacement p;
  p.strategy = std::string(to_string(strategy));
  p.ranks = ranks;
  p.experts = experts;
  const std::int64_t base = experts / ranks, remainder = experts % ranks;
  // Physical ids rank by rank, each rank's in its local order (expert_map's arange).
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t local = base + (r < remainder ? 1 : 0);
    const std::int64_t start = r * base + std::min<std::int64_t>(r, remainder);
    for (std::int64_t i = 0; i < local; ++i) {
      p.logical_of.push_back(strategy == PlacementStrategy::linear ? start + i : r + i * ranks);
      p.rank_of.push_back(r);
    }
  }
  index_replicas(p);
  return p;
}

ExpertPlacement eplb_placement(const std::vector<std::int64_t>& load, int ranks,
                               std::int64_t redundant) {
  const auto experts = static_cast<std::int64_t>(load.size());
  check_ranks(experts, ranks);
  if (redundant < 0)
    throw std::invalid_argument("--redundant-experts=" + std::to_string(redundant) +
                                " is invalid (must be >= 0)");
  const std::int64_t physical = experts + redundant;
  if (physical % ranks != 0)
    throw std::invalid_argument(
        "--redundant-experts=" + std::to_string(redundant) + ": " + std::to_string(experts) +
        " experts + " + std::to_string(redundant) + " redundant = " + std::to_string(physical) +
        " physical experts do not split evenly over ep=" + std::to_string(ranks) +
        " ranks (vLLM's EPLB needs a multiple of ep)");
  // replicate_experts: the first E physical experts are the logical ones; each further replica
  // goes to the expert with the largest load per replica (the lower id on a tie).
  std::vector<std::int64_t> logical(static_cast<std::size_t>(physical));
  std::iota(logical.begin(), logical.begin() + experts, 0);
  std::vector<std::int64_t> count(static_cast<std::size_t>(experts), 1);
  const auto per_replica = [&](std::int64_t e) {
    return static_cast<double>(load[static_cast<std::size_t>(e)]) /
           static_cast<double>(count[static_cast<std::size_t>(e)]);
  };
  for (std::int64_t i = experts; i < physical; ++i) {
    std::int64_t best = 0;
    for (std::int64_t e = 1; e < experts; ++e)
      if (per_replica(e) > per_replica(best)) best = e;
    logical[static_cast<std::size_t>(i)] = best;
    ++count[static_cast<std::size_t>(best)];
  }
  // balanced_packing: heaviest first (stable), each to the least loaded rank with room.
  std::vector<std::int64_t> order(static_cast<std::size_t>(physical));
  std::iota(order.begin(), order.end(), 0);
  const auto weight = [&](std::int64_t q) {
    return per_replica(logical[static_cast<std::size_t>(q)]);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return weight(a) > weight(b); });
  const std::int64_t per_rank = physical / ranks;
  std::vector<double> rank_weight(static_cast<std::size_t>(ranks), 0);
  std::vector<std::vector<std::int64_t>> packed(static_cast<std::size_t>(ranks));
  for (const std::int64_t q : order) {
    int best = -1;
    for (int r = 0; r < ranks; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      if (static_cast<std::int64_t>(packed[ri].size()) == per_rank) continue;
      if (best < 0 || rank_weight[ri] < rank_weight[static_cast<std::size_t>(best)]) best = r;
    }
    packed[static_cast<std::size_t>(best)].push_back(logical[static_cast<std::size_t>(q)]);
    rank_weight[static_cast<std::size_t>(best)] += weight(q);
  }
  ExpertPlacement p;
  p.strategy = "eplb";
  p.ranks = ranks;
  p.experts = experts;
  p.redundant = redundant;
  for (int r = 0; r < ranks; ++r) {
    for (const std::int64_t e : packed[static_cast<std::size_t>(r)]) {
      p.logical_of.push_back(e);
      p.rank_of.push_back(r);
    }
  }
  index_replicas(p);
  return p;
}

std::vector<std::int64_t> physical_of_slots(const RoutingAssignment& a, const ExpertPlacement& p) {
  if (a.experts != p.experts)
    throw std::invalid_argument("the routing has " + std::to_string(a.experts) +
                                " experts but the placement " + std::to_string(p.experts));
  std::vector<std::int64_t> out(a.expert_ids.size());
  for (std::size_t s = 0; s < out.size(); ++s) {
    const auto& reps = p.replicas[static_cast<std::size_t>(a.expert_ids[s])];
    out[s] = reps[s % reps.size()];
  }
  return out;
}

RankLoad rank_load(const RoutingAssignment& a, const ExpertPlacement& p) {
  const auto ranks = static_cast<std::size_t>(p.ranks);
  RankLoad out;
  out.rows.assign(ranks, 0);
  out.experts.assign(ranks, 0);
  out.active_experts.assign(ranks, 0);
  out.tokens.assign(ranks, 0);
  const std::vector<std::int64_t> phys = physical_of_slots(a, p);
  std::vector<std::int64_t> rows_of(static_cast<std::size_t>(p.physical()), 0);
  std::vector<std::int64_t> last_token(ranks, -1);  // slots are in token order
  for (std::size_t s = 0; s < phys.size(); ++s) {
    const auto q = static_cast<std::size_t>(phys[s]);
    const auto r = static_cast<std::size_t>(p.rank_of[q]);
    ++rows_of[q];
    ++out.rows[r];
    const auto token = static_cast<std::int64_t>(s) / a.top_k;
    if (last_token[r] != token) {
      last_token[r] = token;
      ++out.tokens[r];
    }
  }
  for (std::int64_t q = 0; q < p.physical(); ++q) {
    const auto r = static_cast<std::size_t>(p.rank_of[static_cast<std::size_t>(q)]);
    ++out.experts[r];
    if (rows_of[static_cast<std::size_t>(q)] > 0) ++out.active_experts[r];
  }
  const std::int64_t total = std::accumulate(out.rows.begin(), out.rows.end(), std::int64_t{0});
  out.mean_rows = static_cast<double>(total) / static_cast<double>(ranks);
  out.slowest = static_cast<int>(std::max_element(out.rows.begin(), out.rows.end()) -
                                 out.rows.begin());  // the first maximum: the lowest rank
  out.imbalance =
      out.mean_rows > 0
          ? static_cast<double>(out.rows[static_cast<std::size_t>(out.slowest)]) / out.mean_rows
          : 1.0;
  return out;
}

nlohmann::json rank_load_json(const RankLoad& load, const ExpertPlacement& p) {
  return {{"strategy", p.strategy},
          {"ranks", p.ranks},
          {"experts", p.experts},
          {"redundant_experts", p.redundant},
          {"rows_per_rank", load.rows},
          {"experts_per_rank", load.experts},
          {"active_experts_per_rank", load.active_experts},
          {"tokens_per_rank", load.tokens},
          {"mean_rows", load.mean_rows},
          {"imbalance", load.imbalance},
          {"slowest_rank", load.slowest}};
}

}  // namespace fusebench
