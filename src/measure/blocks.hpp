#pragma once
// Measurement in blocks: a comparison group measured B times (each block a whole interleaved
// measurement with 1/B of the time budget; bench/ takes the blocks of neighbouring groups in
// turn, measure_in_blocks() below in a row), the blocks then combined. Why: the paired
// rounds of one measurement cancel drift that is slow next to a round, but not a state of the
// machine that holds for seconds and changes the variants unequally. On 2 shared cores, TP ranks
// and overlap's communication thread are scheduled differently from one stretch of seconds to
// the next; consecutive measurements of one tp_mlp group gave overlap speedups of 0.62-0.84 at
// one token, each with an interval a few percent wide. A block is such a stretch (and, with the
// caller's `between` hook, a fresh set of buffers and threads: bench/ gives it both), so the
// spread of the blocks' estimates measures that effect and the interval takes it in:
//   value     the median of every block's values pooled (paired ratios, or samples), as one
//             measurement with all the rounds would report it;
//   interval  the hull of the pooled order-statistic interval (valid when blocks do not
//             differ) and the Student-t interval of the mean of the blocks' log estimates with
//             B-1 degrees of freedom (valid when they do: the blocks are the independent units).
//             The hull covers at the confidence under either model.
// Pure functions over the blocks' data, unit-tested on synthetic blocks.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "measure/intervals.hpp"
#include "measure/statistics.hpp"
#include "measure/timing_engine.hpp"

namespace fusebench::measure {

// Blocks a group on the CPU backend gets unless --timing-blocks says otherwise: enough degrees of
// freedom (4) for the t quantile (2.78) not to dominate, few enough that each block still reaches
// its minimum samples within its share of the budget.
inline constexpr std::size_t kAutoCpuBlocks = 5;
// Rounds each block takes at least (its timeout waits for them): a block's estimate is the
// median of its own rounds, and one of one or two rounds is mostly noise.
inline constexpr std::size_t kMinRoundsPerBlock = 3;
// Fewer blocks than this are not worth it (t with 1 degree of freedom is 12.7): one block then.
inline constexpr std::size_t kMinBlocks = 3;

// How many of `asked` blocks fit a group's budget: a round (one run of every member) taking
// `round_s` seconds, each block needs kMinRoundsPerBlock of them within `budget_s` (the group's
// max_time_s x members). 1 when fewer than kMinBlocks fit; `note` then says why.
std::size_t blocks_that_fit(std::size_t asked, double round_s, double budget_s, std::string* note);

// The p-quantile (0 < p < 1) of Student's t distribution with df > 0 degrees of freedom.
double student_t_quantile(double p, double df);

// The interval of the geometric mean of `values` (> 0, one per block): exp(mean(log v) +- t *
// sd(log v) / sqrt(B)), t the (1+confidence)/2 quantile with B-1 degrees of freedom; value: the
// geometric mean. nullopt with fewer than 2 values or a value that is not positive.
std::optional<Estimate> between_blocks_interval(const std::vector<double>& values,
                                                double confidence = 0.95);

// Host seconds of one round: one run of every member (set 0), then a synchronise. Outside the
// statistics; a member whose run throws becomes a MemberFailure.
double time_one_round(Backend& backend, std::vector<TimedMember>& members);

// How a group of `asked` blocks is measured: time_one_round(), then blocks_that_fit() of the
// group's budget. blocks 1: one measure_group() under `settings` as given; else that many under
// `per_block` (block_rule()). `note`: timing_blocks_note (one block, or fewer than asked).
struct BlockPlan {
  std::size_t asked = 1, blocks = 1;
  std::string note;
  EngineSettings per_block;
};
BlockPlan plan_blocks(Backend& backend, std::vector<TimedMember>& members,
                      const EngineSettings& settings, std::size_t asked);
// Records the plan in the measurement (blocks_asked, blocks_note).
void label(GroupMeasurement& g, const BlockPlan& plan);

// The rule each of `blocks` blocks runs under: the time budgets (min_time_s, max_time_s) split
// among them, no timeout before kMinRoundsPerBlock rounds; the target and minimum samples as
// asked (each block is a measurement of its own).
StoppingRule block_rule(const StoppingRule& rule, std::size_t blocks);

// One measurement from the blocks of one group (same members, in the same order), as the header
// says. Stop: converged when the combined targeted intervals are within rule.target_ci, else
// timed_out or max_samples when a block stopped so, else blocks_disagree. Throws
// std::invalid_argument when `blocks` is empty or the blocks' members differ in number.
GroupMeasurement combine_blocks(const std::vector<GroupMeasurement>& blocks,
                                const StoppingRule& rule);

// plan_blocks(), then measure_group() that many times, calling `between` (if set) before every
// block after the first (the caller's chance to give the members fresh buffers and threads, or
// to stop by throwing), then combine_blocks() and label(). `after_block` (if set) is called
// after every block with its index, the number of blocks and what that block measured (a
// caller's progress line). With blocks <= 1 exactly measure_group(); where too few blocks fit,
// measure_group() too, labelled. A MemberFailure of any block propagates.
using AfterBlock =
    std::function<void(std::size_t block, std::size_t blocks, const GroupMeasurement& measured)>;
GroupMeasurement measure_in_blocks(Regime regime, Backend& backend,
                                   std::vector<TimedMember>& members,
                                   std::optional<std::size_t> baseline,
                                   const EngineSettings& settings, std::size_t blocks,
                                   const std::function<void()>& between = {},
                                   const AfterBlock& after_block = {});

// How blocks are combined, in words (the report's context.timing.blocks_method).
std::string blocks_method_text(double confidence = 0.95);

}  // namespace fusebench::measure
