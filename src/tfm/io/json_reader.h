// A pull parser over JSON text: the caller asks for the next value in the shape it expects, so the bulk of
// a large document (a tokenizer's 150k-entry vocabulary and merges) goes straight into the caller's own
// tables without a tree in between. json::parse builds its trees with it. Errors name line and column.
//
//   Reader r(text);
//   r.begin_object();
//   for (std::string_view key; r.next_member(key);)
//     if (key == "vocab") read_vocab(r); else r.skip();
//   r.end();
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tfm/io/json.h"

namespace tfm::json {

class Reader {
 public:
  explicit Reader(std::string_view text) : Reader(text, text) {}
  // Reads `text`, a part of `document` that raw() returned; errors count lines and columns from the
  // document's start.
  Reader(std::string_view text, std::string_view document);

  // The type of the next value, without reading it (integer: a number with no fraction or exponent).
  Value::Type peek();

  // Containers: begin_*, then next_* before each member or element until it returns false (having read the
  // closing bracket). `key` stays valid until the next call of next_member.
  void begin_object();
  bool next_member(std::string_view& key);
  void begin_array();
  bool next_element();

  // Scalars; a value of another type fails. The string stays valid until the next call of string().
  std::string_view string();
  int64_t integer();
  double number();  // integers too
  bool boolean();

  Value value();  // the next value as a tree
  void skip();    // reads past the next value, checking its syntax
  // Skips the next value and returns its text. Only its strings and brackets are checked here, which is
  // several times faster than skip() (and a large container is scanned on every thread); the rest is checked
  // when a Reader reads the text.
  std::string_view raw();
  void end();  // only whitespace may remain

  // Whether `s` lies in the text, as the strings without escapes do: those outlive the next call.
  bool in_text(std::string_view s) const;

  // Throws tfm::Error "JSON parse error at line L column C: what" for the current position.
  [[noreturn]] void fail(std::string_view what) const;

 private:
  void skip_space();
  void expect_literal(std::string_view word);
  void enter();
  // Before a member or element: false at the end of the container (having read `close`), else true, past the
  // comma that separates it from the one before.
  bool next_item(char close, std::string_view expected);
  // Reads a string's contents after its opening quote; escapes are decoded into `scratch` when present.
  std::string_view read_string(std::string& scratch);
  uint32_t hex4();
  // Reads a number's text, NaN and Infinity included.
  std::string_view read_number();

  const char* p_;
  const char* begin_;
  const char* end_;
  const char* origin_;  // where line 1 column 1 is
  bool first_ = false;  // the next member or element is the container's first
  int depth_ = 0;
  std::string key_scratch_, string_scratch_;
};

}  // namespace tfm::json
