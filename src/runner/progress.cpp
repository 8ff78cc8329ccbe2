#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <sstream>

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

GroupEta::GroupEta(const std::vector<PlannedFixture>& planned) {
  for (const auto& f : planned) {
    Group& g = groups_[group_index(f)];
    g.cost.flops += f.flops;
    g.cost.bytes += f.bytes;
  }
}

std::size_t GroupEta::group_index(const PlannedFixture& f) {
  const std::string key = group_of(f);
  const auto it = std::find(keys_.begin(), keys_.end(), key);
  if (it != keys_.end()) return static_cast<std::size_t>(it - keys_.begin());
  keys_.push_back(key);
  groups_.push_back({{key, 0, 0, key}, 0, false});
  return groups_.size() - 1;
}

void GroupEta::finished(const PlannedFixture& f, double seconds) {
  Group& g = groups_[group_index(f)];
  g.started = true;
  g.seconds += seconds;
}

double GroupEta::seconds_left() const {
  std::vector<PlannedFixture> done, left;
  std::vector<double> seconds;
  for (const auto& g : groups_) {
    if (g.started) {
      done.push_back(g.cost);
      seconds.push_back(g.seconds);
    } else {
      left.push_back(g.cost);
    }
  }
  return estimate_seconds_left(done, seconds, left);
}

Progress::Progress(std::vector<PlannedFixture> planned, std::ostream& out, bool redraw)
    : planned_(std::move(planned)),
      out_(out),
      redraw_(redraw),
      eta_(planned_),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

bool Progress::stderr_is_terminal() { return ::isatty(::fileno(stderr)) != 0; }

void Progress::finished(const std::string& name) {
  const auto now = std::chrono::steady_clock::now();
  const auto it = std::find_if(planned_.begin(), planned_.end(),
                               [&](const PlannedFixture& p) { return p.name == name; });
  const PlannedFixture done = it != planned_.end() ? *it : PlannedFixture{name, 0, 0, ""};
  if (it != planned_.end()) planned_.erase(it);
  ++finished_;
  eta_.finished(done, std::chrono::duration<double>(now - last_).count());
  last_ = now;
  const std::size_t total = finished_ + planned_.size();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::ostringstream text;  // (operator+ on "[" + to_string trips GCC 12's -Wrestrict)
  text << "[" << finished_ << "/" << total << "] " << name << "  elapsed "
       << format_seconds(elapsed);
  if (!planned_.empty()) text << ", about " << format_seconds(eta_.seconds_left()) << " left";
  const std::string line = text.str();
  if (redraw_) {
    out_ << "\r\x1b[K" << line << std::flush;  // one line, redrawn
    line_shown_ = true;
  } else {
    out_ << line << "\n" << std::flush;
  }
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
