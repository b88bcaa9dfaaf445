#include "tfm/io/progress_bar.h"

#include <gtest/gtest.h>

#include "tfm/io/json.h"

namespace tfm::io {
namespace {

// The reference lines are tqdm's own (tests/hub/make_progress_reference.py).
TEST(ProgressBar, LinesMatchTqdm) {
  const json::Value reference = json::parse_file(TFM_SOURCE_DIR "/tests/hub/progress_reference.json");
  const json::Array& cases = reference.at("cases").as_array();
  ASSERT_GT(cases.size(), 10u);
  for (const json::Value& c : cases) {
    const json::Value& total = c.at("total");
    const std::string line = format_progress_line(
        c.at("desc").as_string(), c.at("n").as_int(),
        total.is_null() ? std::nullopt : std::optional(total.as_int()), c.at("elapsed").as_double(),
        c.at("initial").as_int(), static_cast<int>(c.at("ncols").as_int()),
        c.at("unit").as_string() == "items" ? ProgressUnit::items : ProgressUnit::bytes);
    EXPECT_EQ(line, c.at("line").as_string());
  }
}

}  // namespace
}  // namespace tfm::io
