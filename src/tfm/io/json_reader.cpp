#include "tfm/io/json_reader.h"

#include <array>
#include <bit>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include <omp.h>

#include "tfm/core/error.h"
#include "tfm/core/parallel.h"

namespace tfm::json {
namespace {

constexpr int kMaxDepth = 512;  // hostile input cannot exhaust the stack of value() or skip()

// The bytes raw() stops at outside strings.
constexpr auto kStructural = [] {
  std::array<bool, 256> is{};
  for (unsigned char c : {'"', '{', '}', '[', ']'}) is[c] = true;
  return is;
}();

// The first quote or bracket at or after p, or end: 16 bytes a step through GCC's vector extension (SSE2 or
// NEON), as pretty-printed files are mostly indentation.
const char* find_structural(const char* p, const char* end) {
  static_assert(std::endian::native == std::endian::little, "the byte found first is the lowest set bit");
  using Bytes = unsigned char __attribute__((vector_size(16)));
  for (; end - p >= 16; p += 16) {
    Bytes v;
    std::memcpy(&v, p, sizeof v);
    const auto hit = (v == '"') | (v == '{') | (v == '}') | (v == '[') | (v == ']');
    uint64_t half[2];
    std::memcpy(half, &hit, sizeof half);
    if (half[0]) return p + std::countr_zero(half[0]) / 8;
    if (half[1]) return p + 8 + std::countr_zero(half[1]) / 8;
  }
  while (p < end && !kStructural[static_cast<unsigned char>(*p)]) ++p;
  return p;
}

// Bracket depth over [p, end), outside strings, starting from `depth`: stops just past the bracket that
// brings it to `stop` and returns that place, or returns nullptr at the end (an unterminated string
// included). `lowest` is the lowest depth a closing bracket leaves. Escapes are stepped over, not checked.
const char* scan_brackets(const char* p, const char* end, int& depth, int stop, int& lowest) {
  while (true) {
    p = find_structural(p, end);
    if (p >= end) return nullptr;
    const char c = *p++;
    if (c == '"') {
      while (true) {
        while (p < end && *p != '"' && *p != '\\') ++p;
        if (p >= end) return nullptr;
        if (*p++ == '"') break;
        if (p < end) ++p;  // the escaped character
      }
    } else if (c == '{' || c == '[') {
      ++depth;
    } else {
      lowest = std::min(lowest, --depth);
      if (depth == stop) return p;
    }
  }
}

// Past the bracket that closes the container opening at p; nullptr when it does not close.
const char* container_end(const char* p, const char* end) {
  int depth = 0, lowest = INT_MAX;
  return scan_brackets(p, end, depth, 0, lowest);
}

// Where a container is this large, container_end_in_pieces scans it on every thread.
constexpr ptrdiff_t kParallelScan = 1 << 20;

// container_end over pieces of the text cut just after newlines, which valid JSON never holds inside a
// string: each piece starts outside one, so each is scanned on its own thread for its change of depth and its
// lowest depth; then only the piece where the depth returns to zero is scanned again, from its depth. (In
// invalid JSON a cut may fall inside a string; the container's text is still read by a Reader, which rejects
// it.)
const char* container_end_in_pieces(const char* p, const char* end) {
  std::vector<const char*> cuts{p};
  const int pieces = omp_get_max_threads();
  for (int i = 1; i < pieces; ++i) {
    const char* at = std::max(cuts.back(), p + (end - p) * i / pieces);
    const void* newline = std::memchr(at, '\n', static_cast<size_t>(end - at));
    if (!newline) break;
    cuts.push_back(static_cast<const char*>(newline) + 1);
  }
  cuts.push_back(end);
  const size_t n = cuts.size() - 1;
  std::vector<int> change(n, 0), lowest(n, INT_MAX);
  parallel_for(static_cast<int64_t>(n), {}, [&](int64_t begin, int64_t end) {
    for (auto i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i) {
      int piece_change = 0, piece_lowest = INT_MAX;  // locals: neighbouring results share a cache line
      scan_brackets(cuts[i], cuts[i + 1], piece_change, INT_MIN, piece_lowest);
      change[i] = piece_change;
      lowest[i] = piece_lowest;
    }
  });
  int depth = 0;
  for (size_t i = 0; i < n; ++i) {
    if (lowest[i] != INT_MAX && depth + lowest[i] <= 0) {
      int unused = INT_MAX;
      return scan_brackets(cuts[i], cuts[i + 1], depth, 0, unused);
    }
    depth += change[i];
  }
  return nullptr;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// The integer a number's text holds; nullopt beyond 64 bits.
std::optional<int64_t> to_int64(std::string_view text) {
  int64_t i = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return i;
}

// Python's json keeps the last value of a duplicated key, at the place of the first. Small objects check as
// they go; large ones (a tokenizer's vocabulary) are checked once at the end through a hash table.
constexpr size_t kLinear = 16;

void add_member(Object& members, std::string_view key, Value v) {
  if (members.size() < kLinear) {
    for (auto& m : members) {
      if (m.first == key) {
        m.second = std::move(v);
        return;
      }
    }
  }
  members.emplace_back(std::string(key), std::move(v));
}

void merge_duplicates(Object& members) {
  if (members.size() <= kLinear) return;
  const size_t capacity = std::bit_ceil(members.size() * 2);
  std::vector<uint32_t> slots(capacity, UINT32_MAX);
  std::vector<bool> dropped(members.size(), false);
  bool any = false;
  for (size_t i = 0; i < members.size(); ++i) {
    size_t slot = std::hash<std::string_view>{}(members[i].first) & (capacity - 1);
    while (slots[slot] != UINT32_MAX && members[slots[slot]].first != members[i].first) {
      slot = (slot + 1) & (capacity - 1);
    }
    if (slots[slot] == UINT32_MAX) {
      slots[slot] = static_cast<uint32_t>(i);
    } else {
      members[slots[slot]].second = std::move(members[i].second);
      dropped[i] = any = true;
    }
  }
  if (!any) return;
  size_t kept = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (dropped[i]) continue;
    if (kept != i) members[kept] = std::move(members[i]);
    ++kept;
  }
  members.resize(kept);
}

}  // namespace

Reader::Reader(std::string_view text, std::string_view document)
    : p_(text.data()), begin_(text.data()), end_(p_ + text.size()), origin_(begin_) {
  const std::less_equal<const char*> before;  // pointers into different arrays compare only this way
  if (before(document.data(), begin_) && before(end_, document.data() + document.size()))
    origin_ = document.data();
}

bool Reader::in_text(std::string_view s) const {
  const std::less_equal<const char*> before;
  return before(begin_, s.data()) && before(s.data() + s.size(), end_);
}

void Reader::fail(std::string_view what) const {
  int line = 1, column = 1;
  for (const char* c = origin_; c < p_ && c < end_; ++c) {
    if (*c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  throw_error("JSON parse error at line ", line, " column ", column, ": ", what);
}

void Reader::skip_space() {
  while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
}

void Reader::expect_literal(std::string_view word) {
  if (static_cast<size_t>(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0) {
    fail("invalid literal");
  }
  p_ += word.size();
}

Value::Type Reader::peek() {
  skip_space();
  if (p_ >= end_) fail("unexpected end of input");
  switch (*p_) {
    case '{':
      return Value::Type::object;
    case '[':
      return Value::Type::array;
    case '"':
      return Value::Type::string;
    case 't':
    case 'f':
      return Value::Type::boolean;
    case 'n':
      return Value::Type::null;
    case 'N':  // NaN and Infinity, which Python's json accepts
    case 'I':
      return Value::Type::number;
    default:
      break;
  }
  const char* q = p_;
  if (*q == '-') ++q;
  if (q >= end_ || !is_digit(*q)) {
    if (q < end_ && *q == 'I') return Value::Type::number;
    fail("invalid value");
  }
  while (q < end_ && is_digit(*q)) ++q;
  return q < end_ && (*q == '.' || *q == 'e' || *q == 'E') ? Value::Type::number : Value::Type::integer;
}

void Reader::enter() {
  if (++depth_ > kMaxDepth) fail("nesting too deep");
  ++p_;
  first_ = true;
}

void Reader::begin_object() {
  if (peek() != Value::Type::object) fail("expected an object");
  enter();
}

bool Reader::next_member(std::string_view& key) {
  if (!next_item('}', "expected ',' or '}'")) return false;
  skip_space();
  if (p_ >= end_ || *p_ != '"') fail("expected a string key");
  ++p_;
  key = read_string(key_scratch_);
  skip_space();
  if (p_ >= end_ || *p_ != ':') fail("expected ':'");
  ++p_;
  return true;
}

void Reader::begin_array() {
  if (peek() != Value::Type::array) fail("expected an array");
  enter();
}

bool Reader::next_element() {
  return next_item(']', "expected ',' or ']'");
}

bool Reader::next_item(char close, std::string_view expected) {
  skip_space();
  if (p_ < end_ && *p_ == close) {
    ++p_;
    --depth_;
    first_ = false;
    return false;
  }
  if (!first_) {
    if (p_ >= end_ || *p_ != ',') fail(expected);
    ++p_;
  }
  first_ = false;
  return true;
}

std::string_view Reader::string() {
  if (peek() != Value::Type::string) fail("expected a string");
  ++p_;
  return read_string(string_scratch_);
}

int64_t Reader::integer() {
  if (peek() != Value::Type::integer) fail("expected an integer");
  const std::optional<int64_t> i = to_int64(read_number());
  if (!i) fail("integer out of range");
  return *i;
}

double Reader::number() {
  const Value::Type t = peek();
  if (t != Value::Type::integer && t != Value::Type::number) fail("expected a number");
  const std::string_view text = read_number();
  if (text == "NaN") return std::nan("");
  if (text == "Infinity") return INFINITY;
  if (text == "-Infinity") return -INFINITY;
  double d = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (ptr != text.data() + text.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
    fail("invalid number");
  return d;
}

bool Reader::boolean() {
  if (peek() != Value::Type::boolean) fail("expected a boolean");
  const bool b = *p_ == 't';
  expect_literal(b ? "true" : "false");
  return b;
}

Value Reader::value() {
  switch (peek()) {
    case Value::Type::object: {
      begin_object();
      Object members;
      for (std::string_view key; next_member(key);) {
        const std::string owned(key);  // the value's own keys reuse the scratch space
        add_member(members, owned, value());
      }
      merge_duplicates(members);
      return Value(std::move(members));
    }
    case Value::Type::array: {
      begin_array();
      Array items;
      while (next_element()) items.push_back(value());
      return Value(std::move(items));
    }
    case Value::Type::string:
      return Value(std::string(string()));
    case Value::Type::boolean:
      return Value(boolean());
    case Value::Type::null:
      expect_literal("null");
      return Value();
    case Value::Type::integer: {
      const char* start = p_;
      if (const std::optional<int64_t> i = to_int64(read_number())) return Value(*i);
      p_ = start;  // beyond 64 bits: a float, as before
      return Value(number());
    }
    case Value::Type::number:
      return Value(number());
  }
  fail("invalid value");
}

void Reader::skip() {
  switch (peek()) {
    case Value::Type::object:
      begin_object();
      for (std::string_view key; next_member(key);) skip();
      return;
    case Value::Type::array:
      begin_array();
      while (next_element()) skip();
      return;
    case Value::Type::string:
      string();
      return;
    case Value::Type::boolean:
      boolean();
      return;
    case Value::Type::null:
      expect_literal("null");
      return;
    case Value::Type::integer:
    case Value::Type::number:
      read_number();  // the syntax only: a part raw() returns is converted by whoever reads it
      return;
  }
}

std::string_view Reader::raw() {
  skip_space();
  const char* start = p_;
  if (p_ >= end_ || (*p_ != '{' && *p_ != '[')) {
    skip();  // a scalar is checked now
    return std::string_view(start, static_cast<size_t>(p_ - start));
  }
  // In pieces, the text is scanned about twice over (the piece where the container ends again, and the rest
  // of the document after it): a gain from four threads on.
  const bool large = end_ - p_ >= kParallelScan && omp_get_max_threads() >= 4;
  const char* close = large ? container_end_in_pieces(p_, end_) : container_end(p_, end_);
  if (!close) {
    p_ = end_;
    fail("unexpected end of input");
  }
  p_ = close;
  return std::string_view(start, static_cast<size_t>(p_ - start));
}

void Reader::end() {
  skip_space();
  if (p_ != end_) fail("unexpected data after the JSON value");
}

std::string_view Reader::read_string(std::string& scratch) {
  auto plain_run = [&] {  // up to the next quote, escape or control character
    const char* run = p_;
    while (p_ < end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
    return std::string_view(run, static_cast<size_t>(p_ - run));
  };
  const std::string_view run = plain_run();
  if (p_ < end_ && *p_ == '"') {  // no escapes: the text itself
    ++p_;
    return run;
  }
  scratch.assign(run);
  while (true) {
    if (p_ >= end_) fail("unterminated string");
    const char c = *p_++;
    if (c == '"') return scratch;
    if (c != '\\') fail("control character in string");
    if (p_ >= end_) fail("unterminated string");
    switch (*p_++) {
      case '"':
        scratch += '"';
        break;
      case '\\':
        scratch += '\\';
        break;
      case '/':
        scratch += '/';
        break;
      case 'b':
        scratch += '\b';
        break;
      case 'f':
        scratch += '\f';
        break;
      case 'n':
        scratch += '\n';
        break;
      case 'r':
        scratch += '\r';
        break;
      case 't':
        scratch += '\t';
        break;
      case 'u': {
        uint32_t cp = hex4();
        if (cp >= 0xd800 && cp < 0xdc00 && end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
          const char* save = p_;
          p_ += 2;
          const uint32_t low = hex4();
          if (low >= 0xdc00 && low < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else {
            p_ = save;
          }
        }
        append_utf8(scratch, cp);  // a lone surrogate is kept as its 3-byte form, as Python keeps it in a str
        break;
      }
      default:
        fail("invalid escape in string");
    }
    scratch.append(plain_run());
  }
}

uint32_t Reader::hex4() {
  if (end_ - p_ < 4) fail("truncated \\u escape");
  uint32_t cp = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = *p_++;
    cp <<= 4;
    if (c >= '0' && c <= '9') {
      cp |= static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      cp |= static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      cp |= static_cast<uint32_t>(c - 'A' + 10);
    } else {
      fail("invalid \\u escape");
    }
  }
  return cp;
}

std::string_view Reader::read_number() {
  const char* start = p_;
  if (p_ < end_ && *p_ == 'N') {
    expect_literal("NaN");
    return "NaN";
  }
  if (p_ < end_ && *p_ == '-') ++p_;
  if (p_ < end_ && *p_ == 'I') {
    expect_literal("Infinity");
    return std::string_view(start, static_cast<size_t>(p_ - start));
  }
  if (p_ >= end_ || !is_digit(*p_)) fail("invalid value");
  if (*p_ == '0') {
    ++p_;
  } else {
    while (p_ < end_ && is_digit(*p_)) ++p_;
  }
  if (p_ < end_ && *p_ == '.') {
    ++p_;
    if (p_ >= end_ || !is_digit(*p_)) fail("invalid number");
    while (p_ < end_ && is_digit(*p_)) ++p_;
  }
  if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
    ++p_;
    if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
    if (p_ >= end_ || !is_digit(*p_)) fail("invalid number");
    while (p_ < end_ && is_digit(*p_)) ++p_;
  }
  return std::string_view(start, static_cast<size_t>(p_ - start));
}

Value parse(std::string_view text) {
  Reader reader(text);
  Value v = reader.value();
  reader.end();
  return v;
}

}  // namespace tfm::json
