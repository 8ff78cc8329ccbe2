#pragma once
// TP or EP (issue 40, docs/advise.md "TP or EP"): for the tp_moe op's comparisons at tp > 1, per
// token count which of tp, ep_ar, ep_ag_rs and ep_a2a is fastest, from the measured decision where
// the comparison has one (its entries judged: not contended, not modelled, 95% intervals that
// decide), else from the cost model's prediction each entry carries (moe_ranks.predicted, read
// by the shared entry reader), labelled modelled; and the token counts between which the fastest
// changes from TP to EP or back. Kept apart from the advisor's decisions: it reads one field of an
// entry and the finished comparisons.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fusebench/advise.hpp"

namespace fusebench::advise {

// One EpAdvice per tp_moe key at tp > 1 (every report's entries; `comparisons` the decisions
// build() made from them).
std::vector<EpAdvice> ep_advice(const std::vector<Report>& reports,
                                const std::vector<Comparison>& comparisons);

// The outputs: {key fields, summary, points, crossovers} per advice; a markdown section ("" when
// there is none).
nlohmann::json ep_advice_json(const std::vector<EpAdvice>& advice);
std::string ep_advice_markdown(const std::vector<EpAdvice>& advice);

}  // namespace fusebench::advise
