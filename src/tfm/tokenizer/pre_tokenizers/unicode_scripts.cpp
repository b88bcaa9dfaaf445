// UnicodeScripts: cuts where the Unicode script changes. As in the Rust library, spaces belong to any script,
// and Hiragana, Katakana and the prolonged sound mark "ー" count as Han, so Japanese text stays together.
#include <vector>

#include "tfm/tokenizer/json_fields.h"
#include "tfm/tokenizer/pre_tokenizers/pre_tokenizer.h"
#include "tfm/tokenizer/regex.h"
#include "tfm/tokenizer/unicode.h"

namespace tfm::tokenizer {
namespace {

// The scripts of Unicode 14 (PCRE2 10.42); a name this PCRE2 does not know is skipped. Characters of none of
// them (unassigned) are script "Unknown".
const char* const kScripts[] = {"Common",
                                "Inherited",
                                "Latin",
                                "Greek",
                                "Cyrillic",
                                "Armenian",
                                "Hebrew",
                                "Arabic",
                                "Syriac",
                                "Thaana",
                                "Nko",
                                "Samaritan",
                                "Mandaic",
                                "Devanagari",
                                "Bengali",
                                "Gurmukhi",
                                "Gujarati",
                                "Oriya",
                                "Tamil",
                                "Telugu",
                                "Kannada",
                                "Malayalam",
                                "Sinhala",
                                "Thai",
                                "Lao",
                                "Tibetan",
                                "Myanmar",
                                "Georgian",
                                "Hangul",
                                "Ethiopic",
                                "Cherokee",
                                "Canadian_Aboriginal",
                                "Ogham",
                                "Runic",
                                "Tagalog",
                                "Hanunoo",
                                "Buhid",
                                "Tagbanwa",
                                "Khmer",
                                "Mongolian",
                                "Limbu",
                                "Tai_Le",
                                "New_Tai_Lue",
                                "Buginese",
                                "Tai_Tham",
                                "Balinese",
                                "Sundanese",
                                "Batak",
                                "Lepcha",
                                "Ol_Chiki",
                                "Glagolitic",
                                "Tifinagh",
                                "Han",
                                "Hiragana",
                                "Katakana",
                                "Bopomofo",
                                "Yi",
                                "Vai",
                                "Bamum",
                                "Syloti_Nagri",
                                "Phags_Pa",
                                "Saurashtra",
                                "Kayah_Li",
                                "Rejang",
                                "Javanese",
                                "Cham",
                                "Tai_Viet",
                                "Meetei_Mayek",
                                "Lisu",
                                "Coptic",
                                "Braille",
                                "Linear_B",
                                "Lycian",
                                "Carian",
                                "Old_Italic",
                                "Gothic",
                                "Old_Permic",
                                "Ugaritic",
                                "Old_Persian",
                                "Deseret",
                                "Shavian",
                                "Osmanya",
                                "Osage",
                                "Elbasan",
                                "Caucasian_Albanian",
                                "Vithkuqi",
                                "Linear_A",
                                "Cypriot",
                                "Imperial_Aramaic",
                                "Palmyrene",
                                "Nabataean",
                                "Hatran",
                                "Phoenician",
                                "Lydian",
                                "Meroitic_Hieroglyphs",
                                "Meroitic_Cursive",
                                "Kharoshthi",
                                "Old_South_Arabian",
                                "Old_North_Arabian",
                                "Manichaean",
                                "Avestan",
                                "Inscriptional_Parthian",
                                "Inscriptional_Pahlavi",
                                "Psalter_Pahlavi",
                                "Old_Turkic",
                                "Old_Hungarian",
                                "Hanifi_Rohingya",
                                "Yezidi",
                                "Old_Sogdian",
                                "Sogdian",
                                "Old_Uyghur",
                                "Chorasmian",
                                "Elymaic",
                                "Brahmi",
                                "Kaithi",
                                "Sora_Sompeng",
                                "Chakma",
                                "Mahajani",
                                "Sharada",
                                "Khojki",
                                "Multani",
                                "Khudawadi",
                                "Grantha",
                                "Newa",
                                "Tirhuta",
                                "Siddham",
                                "Modi",
                                "Takri",
                                "Ahom",
                                "Dogra",
                                "Warang_Citi",
                                "Dives_Akuru",
                                "Nandinagari",
                                "Zanabazar_Square",
                                "Soyombo",
                                "Pau_Cin_Hau",
                                "Bhaiksuki",
                                "Marchen",
                                "Masaram_Gondi",
                                "Gunjala_Gondi",
                                "Makasar",
                                "Cuneiform",
                                "Cypro_Minoan",
                                "Egyptian_Hieroglyphs",
                                "Anatolian_Hieroglyphs",
                                "Mro",
                                "Tangsa",
                                "Bassa_Vah",
                                "Pahawh_Hmong",
                                "Medefaidrin",
                                "Miao",
                                "Tangut",
                                "Nushu",
                                "Khitan_Small_Script",
                                "Duployan",
                                "SignWriting",
                                "Nyiakeng_Puachue_Hmong",
                                "Toto",
                                "Wancho",
                                "Mende_Kikakui",
                                "Adlam",
                                "Kawi",
                                "Nag_Mundari"};

class UnicodeScripts : public PreTokenizer {
 public:
  UnicodeScripts() {
    for (const char* name : kScripts) {
      try {
        scripts_.push_back(Regex(std::string("^\\p{") + name + "}"));
        names_.push_back(name);
      } catch (const Error&) {  // not in this PCRE2's Unicode version
      }
    }
  }

  // A piece starts at each character whose script differs from the last one seen (spaces aside); whatever
  // comes before the first such character (leading spaces) is dropped, as in the Rust library.
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& piece : pieces) {
      const std::string_view text = piece.text;
      std::vector<size_t> starts;
      int last = kNone;
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t start = pos;
        const char32_t c = next_code_point(text, pos);
        const int script = script_of(c, text.substr(start, pos - start));
        if (script == kAny) continue;
        if (script != last) starts.push_back(start);
        last = script;
      }
      for (size_t i = 0; i < starts.size(); ++i) {
        const size_t end = i + 1 < starts.size() ? starts[i + 1] : text.size();
        out.push_back(
            {std::string(text.substr(starts[i], end - starts[i])), piece.at_start && starts[i] == 0});
      }
    }
    pieces = std::move(out);
  }

 private:
  static constexpr int kNone = -2;
  static constexpr int kAny = -3;

  int script_of(char32_t c, std::string_view ch) const {
    if (c == ' ') return kAny;
    if (c == 0x30FC) return han();
    for (size_t i = 0; i < scripts_.size(); ++i) {
      if (scripts_[i].find_all(ch).empty()) continue;
      const std::string_view name = names_[i];
      return name == "Hiragana" || name == "Katakana" ? han() : static_cast<int>(i);
    }
    return -1;  // Unknown
  }

  int han() const {
    for (size_t i = 0; i < names_.size(); ++i)
      if (std::string_view(names_[i]) == "Han") return static_cast<int>(i);
    return -1;
  }

  std::vector<Regex> scripts_;
  std::vector<const char*> names_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_unicode_scripts(const json::Value&) {
  return std::make_unique<UnicodeScripts>();
}

}  // namespace tfm::tokenizer
