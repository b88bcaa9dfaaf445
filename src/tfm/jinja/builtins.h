// Python behaviour that both the interpreter and the filters need: attribute and item access as Jinja2's
// sandbox does it, methods of str/list/dict, slicing and printf-style formatting.
#pragma once

#include <optional>
#include <string>

#include "tfm/jinja/value.h"

namespace tfm::jinja {

// obj.name: a dict's method or member, a str or list method, a namespace attribute; otherwise an undefined
// value that reports what was missing. Methods that would modify an object are refused, as in Jinja2's
// ImmutableSandboxedEnvironment.
Value get_attribute(const Value& object, const std::string& name);
// obj[key]: member or element first, then attribute, as Jinja2 does.
Value get_item(const Value& object, const Value& key);
// obj[start:stop:step] on a str, list or tuple; absent parts are nullopt.
Value slice(const Value& object, std::optional<int64_t> start, std::optional<int64_t> stop,
            std::optional<int64_t> step);
// Python's "format % args".
std::string percent_format(const std::string& format, const Value& args);
// Python's `item in container`.
bool contains(const Value& container, const Value& item);

}  // namespace tfm::jinja
