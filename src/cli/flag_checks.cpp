#include "flag_checks.hpp"

#include <algorithm>
#include <stdexcept>

namespace fusebench::bench {

CLI::Validator real_number(std::string valid) {
  return CLI::Validator(
      [valid](std::string& text) -> std::string {
        double v = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ec != std::errc() || ptr != end)
          return "'" + text + "' is invalid (" + valid + ")";
        return {};
      },
      "");
}

CLI::Validator checked_by(std::function<void(const std::string&)> check) {
  return CLI::Validator(
      [check](std::string& text) -> std::string {
        try {
          check(text);
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
        return {};
      },
      "");
}

namespace {

// Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
// neighbours each count one ("modles" is one from "models").
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_name(std::string_view given, const std::vector<std::string>& known) {
  // Near enough: two edits, or a quarter of the name for long ones (dashes not counted).
  const std::size_t letters =
      given.size() - std::min<std::size_t>(given.find_first_not_of('-'), given.size());
  const std::size_t limit = std::max<std::size_t>(2, letters / 4);
  std::string best;
  std::size_t best_distance = limit + 1;
  for (const auto& name : known) {
    const std::size_t d = edit_distance(given, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best;
}

std::vector<std::string> flag_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
  }
  return names;
}

void reject_unknown_flags(const CLI::App& app, int argc, char** argv,
                          const std::vector<std::string>& also_known, const std::string& help) {
  std::vector<std::string> known = flag_names(app);
  known.insert(known.end(), also_known.begin(), also_known.end());
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.size() <= 2 || arg.substr(0, 2) != "--") continue;
    const std::string name(arg.substr(0, arg.find('=')));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string near = closest_name(name, known);
    throw std::invalid_argument("unknown flag " + name +
                                (near.empty() ? "" : " (did you mean " + near + "?)") + "; " +
                                help);
  }
}

void reject_empty_list_items(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.size() <= 2 || arg.substr(0, 2) != "--") continue;
    const std::size_t eq = arg.find('=');
    const std::string name(arg.substr(0, eq));
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr || opt->get_delimiter() == '\0') continue;
    std::string_view value;
    if (eq != std::string_view::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < argc) {
      value = argv[i + 1];
    }
    if (value.empty()) continue;
    std::size_t item = 1, start = 0;
    while (true) {
      const std::size_t end = std::min(value.find(opt->get_delimiter(), start), value.size());
      if (end == start) {
        throw std::invalid_argument(
            name + ": item " + std::to_string(item) + " of '" + std::string(value) +
            "' is empty (every comma-separated item needs a value: drop the extra comma)");
      }
      if (end == value.size()) break;
      start = end + 1;
      ++item;
    }
  }
}

}  // namespace fusebench::bench
