// Python's str operations on UTF-8 text, as far as templates use them (Unicode simple case mapping).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tfm/jinja/value.h"

namespace tfm::jinja::pystr {

bool is_space(std::string_view ch);  // one character (code point) as UTF-8
std::string strip(std::string_view s, const Value& chars, bool left, bool right);
std::vector<std::string> split(std::string_view s, const Value& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const Value& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
std::string swapcase(std::string_view s);
// Python's format(value, spec) for the common specs: fill, align, sign, width, precision, s/d/f/e/g/x/%.
std::string format_value(const Value& v, std::string_view spec);
// str.format(*args, **kwargs).
std::string format(std::string_view fmt, const Args& args);

}  // namespace tfm::jinja::pystr
