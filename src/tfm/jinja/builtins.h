// Python behaviour that both the interpreter and the filters need: operators, attribute and item access as
// Jinja2's sandbox does it, methods of str/list/dict, slicing and printf-style formatting.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tfm/jinja/context.h"
#include "tfm/jinja/value.h"

namespace tfm::jinja {

// Python's int operations. Python's integers are unbounded, tfm's have 64 bits: a result that does not fit
// throws instead of wrapping or trapping (the smallest integer // -1 raises SIGFPE in C++).
int64_t int_add(int64_t a, int64_t b);
int64_t int_sub(int64_t a, int64_t b);
int64_t int_mul(int64_t a, int64_t b);
int64_t int_floordiv(int64_t a, int64_t b);       // throws on b == 0
int64_t int_mod(int64_t a, int64_t b);            // the sign of b, as Python's %; throws on b == 0
int64_t int_pow(int64_t base, int64_t exponent);  // exponent >= 0
int64_t int_from_double(double d);                // Python's int(float): truncates; inf and nan throw
// An integer argument (ints and bools, as Python's __index__), or the fallback when undefined or None.
int64_t int_arg(const Value& v, int64_t fallback);

// a <op> b for Python's binary operators + - * / // % ** (with str % args), sizes checked before building.
Value binary_op(Context& ctx, std::string_view op, const Value& a, const Value& b);

// obj.name: a dict's method or member, a str or list method, a namespace attribute; otherwise an undefined
// value that reports what was missing. Methods that would modify an object are refused, as in Jinja2's
// ImmutableSandboxedEnvironment.
Value get_attribute(const Value& object, const std::string& name);
// obj[key]: member or element first, then attribute, as Jinja2 does.
Value get_item(Context& ctx, const Value& object, const Value& key);
// obj[start:stop:step] on a str, list or tuple; absent parts are nullopt.
Value slice(Context& ctx, const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step);
// Python's "format % args".
std::string percent_format(Context& ctx, const std::string& format, const Value& args);
// Python's `item in container`.
bool contains(Context& ctx, const Value& container, const Value& item);

}  // namespace tfm::jinja
