#include "tfm/train/training_records.h"

#include "tfm/core/error.h"
#include "tfm/io/file.h"
#include "tfm/io/json_reader.h"

namespace tfm {
namespace {

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

std::string_view type_name(const json::Value& v) {
  return json::Value::type_name(v.type());
}

void check_messages(const json::Value& messages, const std::string& where) {
  check(messages.is_array(), where, "\"messages\" must be a list of message objects, found ",
        type_name(messages));
  check(messages.size() > 0, where, "\"messages\" is empty");
  bool has_assistant = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const json::Value& m = messages[i];
    check(m.is_object(), where, "message ", i, " must be an object, found ", type_name(m));
    const json::Value* role = m.find("role");
    const json::Value* content = m.find("content");
    check(role && role->is_string(), where, "message ", i, " needs a \"role\" string");
    check(content && content->is_string(), where, "message ", i,
          " needs a \"content\" string (\"\" for a message that only calls tools)");
    has_assistant = has_assistant || role->as_string() == "assistant";
  }
  check(has_assistant, where, "the conversation has no assistant message, so nothing in it takes a loss");
}

}  // namespace

TrainingRecords parse_training_records(std::string_view contents, const std::string& file) {
  TrainingRecords out;
  int64_t line_number = 0;
  for (size_t begin = 0; begin < contents.size();) {
    const size_t newline = contents.find('\n', begin);
    const size_t end = newline == std::string_view::npos ? contents.size() : newline;
    const std::string_view line = contents.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (is_blank(line)) continue;

    const std::string where = file + " line " + std::to_string(line_number) + ": ";
    json::Value record;
    try {
      json::Reader reader(line, contents);  // parse errors count lines from the file's start
      record = reader.value();
      reader.end();
    } catch (const Error& e) {
      throw_error(file, ": ", e.what());
    }
    check(record.is_object(), where, "a record must be a JSON object, found ", type_name(record));
    const json::Value* text = record.find("text");
    const json::Value* messages = record.find("messages");
    check(text || messages, where, "the record has neither \"text\" nor \"messages\"");
    check(!(text && messages), where, "the record has both \"text\" and \"messages\"; give one");
    const RecordKind kind = text ? RecordKind::text : RecordKind::messages;
    if (out.records.empty()) out.kind = kind;
    if (kind != out.kind)  // not check(): its message reads the first record, which the first line has not
      throw_error(where, "a \"", text ? "text" : "messages", "\" record in a file of \"",
                  out.kind == RecordKind::text ? "text" : "messages", "\" records (line ", out.records.front().line,
                  "); all records of a file must be of one kind");
    if (text)
      check(text->is_string(), where, "\"text\" must be a string, found ", type_name(*text));
    else
      check_messages(*messages, where);
    out.records.push_back({line_number, text ? *text : *messages});
  }
  check(!out.records.empty(), file, " holds no records (a training file has one JSON object per line)");
  return out;
}

TrainingRecords read_training_records(const std::string& path) {
  return parse_training_records(io::read_file(path), path);
}

}  // namespace tfm
