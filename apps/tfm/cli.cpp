#include "cli.h"

#include <charconv>
#include <iostream>
#include <iterator>

#include "tfm/core/error.h"

namespace tfm::cli {

const char* const kCommonHelp =
    "  --quiet                     print only results and errors: no warnings, progress bars or timing\n"
    "                              (TRANSFORMERS_VERBOSITY, one of debug, info, warning, error, critical,\n"
    "                              chooses which messages show; default: warning)\n";

Args::Args(std::vector<std::string> words) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--help" || w == "-h") {
      help_ = true;
      continue;
    }
    if (w == "--quiet") {
      quiet_ = true;
      continue;
    }
    check(w.size() > 2 && w.starts_with("--"), "unexpected argument '", w, "'");
    Word word;
    const auto eq = w.find('=');
    if (eq != std::string::npos) {
      word.name = w.substr(2, eq - 2);
      word.value = w.substr(eq + 1);
    } else {
      word.name = w.substr(2);
      // A value follows unless the next word is another option. Negative numbers count as values.
      if (i + 1 < words.size() && !(words[i + 1].starts_with("--"))) word.value = words[++i];
    }
    words_.push_back(std::move(word));
  }
}

Args::Word* Args::find(std::string_view name) {
  Word* found = nullptr;
  for (Word& w : words_) {
    if (w.name == name) {
      w.used = true;
      found = &w;  // the last occurrence wins
    }
  }
  return found;
}

std::optional<std::string> Args::get(std::string_view name) {
  Word* w = find(name);
  if (!w) return std::nullopt;
  check(w->value.has_value(), "--", name, " needs a value");
  return w->value;
}

std::string Args::get_or(std::string_view name, std::string_view fallback) {
  auto v = get(name);
  return v ? *v : std::string(fallback);
}

std::optional<int64_t> Args::get_int(std::string_view name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  check(ec == std::errc() && end == v->data() + v->size(), "--", name, " needs an integer, got '", *v, "'");
  return out;
}

int64_t Args::get_int(std::string_view name, int64_t fallback) {
  return get_int(name).value_or(fallback);
}

std::optional<double> Args::get_double(std::string_view name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  double out = 0;
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  check(ec == std::errc() && end == v->data() + v->size(), "--", name, " needs a number, got '", *v, "'");
  return out;
}

bool Args::flag(std::string_view name) {
  Word* w = find(name);
  if (!w) return false;
  check(!w->value.has_value() || *w->value == "true" || *w->value == "false", "--", name,
        " is a flag and takes no value, got '", *w->value, "'");
  return !w->value.has_value() || *w->value == "true";
}

std::optional<bool> Args::toggle(std::string_view name) {
  const std::string off = "no-" + std::string(name);
  const bool on_given = find(name) != nullptr, off_given = find(off) != nullptr;
  check(!(on_given && off_given), "--", name, " and --", off, " contradict each other");
  if (on_given) return flag(name);
  if (off_given) return !flag(off);
  return std::nullopt;
}

std::vector<std::string> Args::take_unused() {
  std::vector<std::string> words;
  for (Word& w : words_) {
    if (w.used) continue;
    w.used = true;
    words.push_back("--" + w.name);
    if (w.value) words.push_back(*w.value);
  }
  return words;
}

void Args::finish() {
  for (const Word& w : words_) check(w.used, "unknown option --", w.name);
}

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

std::vector<int64_t> parse_id_list(std::string_view text) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view part = text.substr(start, comma - start);
    int64_t id = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), id);
    check(!part.empty() && ec == std::errc() && end == part.data() + part.size() && id >= 0,
          "invalid token id '", part, "' in '", text, "'");
    ids.push_back(id);
    start = comma + 1;
  }
  return ids;
}

}  // namespace tfm::cli
