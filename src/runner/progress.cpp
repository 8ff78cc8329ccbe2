#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <ostream>
#include <sstream>

#include "launch_rank.hpp"

namespace fusebench::bench {
namespace {

std::string format_seconds(double s) {
  char buf[32];
  const long total = static_cast<long>(std::max(0.0, std::round(s)));
  std::snprintf(buf, sizeof(buf), "%ldm%02lds", total / 60, total % 60);
  return buf;
}

std::array<double, 3> features(const PlannedFixture& f) { return {1.0, f.flops, f.bytes}; }

// Least squares over the features in `mask` (bit i: feature i), by Gaussian elimination on the
// normal equations. False when singular or when a coefficient comes out negative.
bool fit(const std::vector<PlannedFixture>& xs, const std::vector<double>& ys, unsigned mask,
         std::array<double, 3>& coef) {
  std::vector<int> used;
  for (int i = 0; i < 3; ++i) {
    if (mask & (1u << i)) used.push_back(i);
  }
  const std::size_t n = used.size();
  // Scaled so FLOPs (1e12) and seconds (1) do not defeat the elimination.
  std::array<double, 3> scale{1, 1, 1};
  for (const auto& x : xs) {
    const auto f = features(x);
    for (int i = 0; i < 3; ++i) scale[i] = std::max(scale[i], std::abs(f[i]));
  }
  double a[3][4] = {};
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const auto f = features(xs[k]);
    for (std::size_t i = 0; i < n; ++i) {
      const double fi = f[used[i]] / scale[used[i]];
      for (std::size_t j = 0; j < n; ++j) a[i][j] += fi * f[used[j]] / scale[used[j]];
      a[i][n] += fi * ys[k];
    }
  }
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t pivot = c;
    for (std::size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-12) return false;
    for (std::size_t j = 0; j <= n; ++j) std::swap(a[c][j], a[pivot][j]);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double m = a[r][c] / a[c][c];
      for (std::size_t j = c; j <= n; ++j) a[r][j] -= m * a[c][j];
    }
  }
  coef = {0, 0, 0};
  for (std::size_t i = 0; i < n; ++i) {
    const double v = a[i][n] / a[i][i] / scale[used[i]];
    if (!(v >= 0)) return false;
    coef[used[i]] = v;
  }
  return true;
}

double predict(const std::array<double, 3>& coef, const PlannedFixture& f) {
  const auto x = features(f);
  return coef[0] * x[0] + coef[1] * x[1] + coef[2] * x[2];
}

}  // namespace

double estimate_seconds_left(const std::vector<PlannedFixture>& finished,
                             const std::vector<double>& seconds,
                             const std::vector<PlannedFixture>& remaining) {
  if (finished.empty() || remaining.empty()) return 0;
  std::array<double, 3> best{0, 0, 0};
  double best_residual = std::numeric_limits<double>::infinity();
  for (unsigned mask = 1; mask < 8; ++mask) {
    // Beyond the mean, two observations per term and four at least: a line through the first
    // two fixtures alone would extrapolate their noise to the largest shapes.
    const auto terms = static_cast<std::size_t>(__builtin_popcount(mask));
    if (mask != 1 && (finished.size() < 4 || 2 * terms > finished.size())) continue;
    std::array<double, 3> coef{};
    if (!fit(finished, seconds, mask, coef)) continue;
    double residual = 0;
    for (std::size_t k = 0; k < finished.size(); ++k) {
      const double e = predict(coef, finished[k]) - seconds[k];
      residual += e * e;
    }
    // A simpler fit wins unless a bigger one is clearly better (ties: fewer terms first).
    if (residual < best_residual * (1 - 1e-9)) {
      best_residual = residual;
      best = coef;
    }
  }
  double left = 0;
  for (const auto& f : remaining) left += predict(best, f);
  return left;
}

namespace {
std::string group_of(const PlannedFixture& f) { return f.group.empty() ? f.name : f.group; }
}  // namespace

SweepEta::SweepEta(const std::vector<PlannedFixture>& planned, BlockPolicy policy)
    : policy_(policy) {
  policy_.blocks = std::max<std::size_t>(1, policy_.blocks);
  for (const auto& f : planned) {
    Group& g = groups_[group_index(group_of(f))];
    g.cost.flops += f.flops;
    g.cost.bytes += f.bytes;
    ++g.members;
  }
}

std::size_t SweepEta::group_index(const std::string& key) {
  const auto it = std::find(keys_.begin(), keys_.end(), key);
  if (it != keys_.end()) return static_cast<std::size_t>(it - keys_.begin());
  keys_.push_back(key);
  Group g;
  g.cost = {key, 0, 0, key};
  g.left = policy_.blocks;
  groups_.push_back(g);
  return groups_.size() - 1;
}

void SweepEta::block_done(const BlockDone& e, double seconds) {
  Group& g = groups_[group_index(e.group_key)];
  if (g.members == 0) g.members = e.members;  // a group nobody planned
  ++g.done;
  ++blocks_done_;
  g.seconds += seconds;
  // The measurement's own plan now says how many blocks it has left (fewer than asked when
  // the budget affords fewer, none when its members failed).
  g.left = e.blocks > e.block ? e.blocks - e.block - 1 : 0;
  if (e.sampled_s > 0) {
    outside_sampling_s_ += std::max(0.0, seconds - e.sampled_s);
    ++sampled_blocks_;
  }
}

std::size_t SweepEta::blocks_total() const {
  std::size_t n = 0;
  for (const auto& g : groups_) n += g.done + g.left;
  return n;
}

std::pair<std::size_t, std::size_t> SweepEta::next_block(const std::string& key) const {
  const auto it = std::find(keys_.begin(), keys_.end(), key);
  if (it == keys_.end()) return {1, policy_.blocks};
  const Group& g = groups_[static_cast<std::size_t>(it - keys_.begin())];
  return {g.done + 1, std::max(g.done + g.left, g.done + 1)};
}

double SweepEta::projected_s(const Group& g) const {
  return g.seconds / static_cast<double>(g.done) * static_cast<double>(g.done + g.left);
}

double SweepEta::predicted_group_s(const Group& g) const {
  std::vector<PlannedFixture> started;
  std::vector<double> whole;
  double longest = 0;
  for (const auto& o : groups_) {
    if (o.done == 0) continue;
    started.push_back(o.cost);
    whole.push_back(projected_s(o));
    longest = std::max(longest, whole.back());
  }
  double s = estimate_seconds_left(started, whole, {g.cost});
  if (policy_.max_time_s > 0) {
    const double members = static_cast<double>(g.members);
    const double outside =
        sampled_blocks_ > 0 ? outside_sampling_s_ / static_cast<double>(sampled_blocks_) : 0;
    const double low = policy_.min_time_s * members + outside;
    const double high = std::max(
        policy_.max_time_s * members + outside * static_cast<double>(policy_.blocks), longest);
    s = std::clamp(s, low, std::max(low, high));
  }
  return s;
}

std::optional<double> SweepEta::seconds_left() const {
  if (blocks_done_ == 0) return std::nullopt;
  double left = 0;
  for (const auto& g : groups_) {
    if (g.done > 0) {
      left += g.seconds / static_cast<double>(g.done) * static_cast<double>(g.left);
    } else if (g.left > 0) {
      left += predicted_group_s(g);
    }
  }
  return left;
}

Progress::Progress(std::vector<PlannedFixture> planned, std::ostream& out, bool redraw,
                   BlockPolicy policy)
    : planned_(std::move(planned)),
      out_(out),
      redraw_(redraw),
      eta_(planned_, policy),
      start_(std::chrono::steady_clock::now()),
      last_block_(start_),
      last_line_(start_) {}

bool Progress::stderr_is_terminal() {
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::string(term) == "dumb") return false;
  // Under mpirun or srun the launcher may hand this rank a pseudo-terminal of its own while its
  // output goes to a file: redrawing would leave escape codes there.
  return launcher_rank() < 0 && ::isatty(::fileno(stderr)) != 0;
}

std::string Progress::timing_text(std::chrono::steady_clock::time_point now) const {
  std::string text =
      "  elapsed " + format_seconds(std::chrono::duration<double>(now - start_).count());
  if (const auto left = eta_.seconds_left()) {
    if (*left > 0) text += ", about " + format_seconds(*left) + " left";
  } else {
    text += ", estimating the time left";
  }
  return text;
}

void Progress::show(const std::string& line, bool always) {
  const auto now = std::chrono::steady_clock::now();
  // Off a terminal every line stays in the log: block lines are thinned to one per interval.
  if (!redraw_ && !always && any_line_ &&
      std::chrono::duration<double>(now - last_line_).count() < plain_interval_s_)
    return;
  any_line_ = true;
  last_line_ = now;
  // One write per line, so nothing else written meanwhile can land inside it.
  const std::string text = redraw_ ? "\r\x1b[K" + line : line + "\n";
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  out_.flush();
  line_shown_ = redraw_;
}

void Progress::block_done(const BlockDone& e) {
  const auto now = std::chrono::steady_clock::now();
  eta_.block_done(e, std::chrono::duration<double>(now - last_block_).count());
  last_block_ = now;
  std::ostringstream text;  // (operator+ on "[" + to_string trips GCC 12's -Wrestrict)
  text << "measuring " << e.group_key << ": block " << (e.block + 1) << "/" << e.blocks << " ("
       << eta_.blocks_done() << "/" << eta_.blocks_total() << " blocks, " << groups_done_ << "/"
       << eta_.groups_total() << " groups done)" << timing_text(now);
  show(text.str(), false);
}

void Progress::group_done(std::size_t, const std::string&) { ++groups_done_; }

void Progress::round_started(std::size_t, const std::string& key, std::size_t round) {
  const auto now = std::chrono::steady_clock::now();
  // A redrawn line a few times a second at most; plain lines at the plain interval (show()).
  if (redraw_ && std::chrono::duration<double>(now - last_line_).count() < 0.25) return;
  if (!redraw_ && std::chrono::duration<double>(now - last_line_).count() < plain_interval_s_)
    return;
  const auto [block, blocks] = eta_.next_block(key);
  std::ostringstream text;
  text << "measuring " << key << ": block " << block << "/" << blocks << ", round " << (round + 1)
       << " (" << eta_.blocks_done() << "/" << eta_.blocks_total() << " blocks, " << groups_done_
       << "/" << eta_.groups_total() << " groups done)" << timing_text(now);
  show(text.str(), false);
}

void Progress::finished(const std::string& name) {
  const auto now = std::chrono::steady_clock::now();
  const auto it = std::find_if(planned_.begin(), planned_.end(),
                               [&](const PlannedFixture& p) { return p.name == name; });
  if (it != planned_.end()) planned_.erase(it);
  ++finished_;
  const std::size_t total = finished_ + planned_.size();
  std::ostringstream text;
  text << "[" << finished_ << "/" << total << "] " << name;
  if (planned_.empty()) {
    text << "  elapsed " << format_seconds(std::chrono::duration<double>(now - start_).count());
  } else {
    text << timing_text(now);
  }
  show(text.str(), true);
}

void Progress::clear() {
  if (redraw_ && line_shown_) {
    out_ << "\r\x1b[K" << std::flush;
    line_shown_ = false;
  }
}

void Progress::end() {
  if (redraw_ && line_shown_) {
    out_ << "\n" << std::flush;
    line_shown_ = false;
  }
}

}  // namespace fusebench::bench
