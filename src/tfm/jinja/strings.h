// Python's str operations on UTF-8 text, as far as templates use them (Unicode simple case mapping). Those
// that can build more than their input (splits into many parts, replace, padding to a width) check the
// render's size limit before they allocate.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tfm/jinja/context.h"
#include "tfm/jinja/value.h"

namespace tfm::jinja::pystr {

// Classes of one character (code point) as UTF-8: str.isspace(), and Python regular expressions' \w and \d.
bool is_space(std::string_view ch);
bool is_word(std::string_view ch);
bool is_decimal(std::string_view ch);
// Substring search in linear time whatever the needle (glibc's memmem is two-way), as Python's str.find;
// npos when absent.
size_t find(std::string_view s, std::string_view sub, size_t from = 0);
size_t rfind(std::string_view s, std::string_view sub);
std::string strip(std::string_view s, const Value& chars, bool left, bool right);
std::vector<std::string> split(Context& ctx, std::string_view s, const Value& sep, int64_t maxsplit);
std::vector<std::string> rsplit(Context& ctx, std::string_view s, const Value& sep, int64_t maxsplit);
std::vector<std::string> splitlines(Context& ctx, std::string_view s, bool keepends);
std::string replace(Context& ctx, std::string_view s, std::string_view from, std::string_view to,
                    int64_t count);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
std::string swapcase(std::string_view s);
// Python's format(value, spec) for the common specs: fill, align, sign, width, precision, s/d/f/e/g/x/%.
std::string format_value(Context& ctx, const Value& v, std::string_view spec);
// str.format(*args, **kwargs).
std::string format(Context& ctx, std::string_view fmt, const Args& args);
// `text` padded with `fill` (one character) to `width` code points: '<' left-aligned, '>' right, '^' centred
// as str.center does, '=' right-aligned after a leading sign (str.zfill).
std::string align(Context& ctx, std::string_view text, int64_t width, std::string_view fill, char how);

}  // namespace tfm::jinja::pystr
