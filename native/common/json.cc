#include "native/common/json.h"

#include <cstdio>
#include <locale>
#include <sstream>
#include <unordered_set>

namespace mscclpp_nccl {

bool JsonValue::isInteger() const {
  const Number* number = std::get_if<Number>(&value_);
  return number && number->isInteger;
}

bool JsonValue::asBool() const {
  const bool* value = std::get_if<bool>(&value_);
  return value && *value;
}

double JsonValue::asDouble() const {
  const Number* number = std::get_if<Number>(&value_);
  return number ? number->value : 0.0;
}

int64_t JsonValue::asInt64() const { return isInteger() ? std::get<Number>(value_).integer : 0; }

const std::string& JsonValue::asString() const {
  static const std::string kEmpty;
  const std::string* value = std::get_if<std::string>(&value_);
  return value ? *value : kEmpty;
}

const JsonValue::Array& JsonValue::asArray() const {
  static const Array kEmpty;
  const Array* value = std::get_if<Array>(&value_);
  return value ? *value : kEmpty;
}

const JsonValue::Object& JsonValue::asObject() const {
  static const Object kEmpty;
  const Object* value = std::get_if<Object>(&value_);
  return value ? *value : kEmpty;
}

const JsonValue* JsonValue::get(const std::string& key) const {
  for (const Member& member : asObject())
    if (member.first == key) return &member.second;
  return nullptr;
}

const char* JsonValue::typeName(Type type) {
  switch (type) {
    case Type::kNull:
      return "null";
    case Type::kBool:
      return "a boolean";
    case Type::kNumber:
      return "a number";
    case Type::kString:
      return "a string";
    case Type::kArray:
      return "an array";
    case Type::kObject:
      return "an object";
  }
  return "?";
}

std::string jsonPosition(const std::string& text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((c & 0xC0) != 0x80) {  // continuation bytes belong to the previous character
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// Recursive descent over the whole text; recursion is bounded by limits.maxDepth.
class JsonParser {
 public:
  JsonParser(const std::string& text, const JsonLimits& limits) : text_(text), limits_(limits) {}

  bool parseDocument(JsonValue* out) {
    // A UTF-8 byte order mark is allowed (RFC 8259 section 8.1) and ignored.
    if (text_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = 3;
    if (!parseValue(out, 0)) return false;
    skipWhitespace();
    if (pos_ != text_.size()) return error(pos_, "unexpected " + describe(pos_) + " after the JSON value");
    return true;
  }

  size_t errorOffset() const { return errorOffset_; }
  const std::string& errorText() const { return errorText_; }

 private:
  bool error(size_t offset, std::string what) {
    errorOffset_ = offset;
    errorText_ = std::move(what);
    return false;
  }

  bool atEnd() const { return pos_ >= text_.size(); }
  unsigned char peek() const { return atEnd() ? 0 : static_cast<unsigned char>(text_[pos_]); }

  std::string describe(size_t offset) const {
    if (offset >= text_.size()) return "end of input";
    unsigned char c = static_cast<unsigned char>(text_[offset]);
    char buffer[16];
    if (c >= 0x20 && c < 0x7F)
      snprintf(buffer, sizeof(buffer), "'%c'", c);
    else
      snprintf(buffer, sizeof(buffer), "byte 0x%02X", c);
    return buffer;
  }

  void skipWhitespace() {
    while (!atEnd()) {
      char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
      ++pos_;
    }
  }

  bool parseValue(JsonValue* out, int depth) {
    skipWhitespace();
    if (++values_ > limits_.maxValues)
      return error(pos_, "more than " + std::to_string(limits_.maxValues) + " values");
    out->offset_ = pos_;
    switch (peek()) {
      case '{':
        return parseObject(out, depth + 1);
      case '[':
        return parseArray(out, depth + 1);
      case '"': {
        std::string text;
        if (!parseString(&text)) return false;
        out->value_ = std::move(text);
        return true;
      }
      case 't':
        return parseLiteral("true", out, true);
      case 'f':
        return parseLiteral("false", out, false);
      case 'n':
        return parseLiteral("null", out, std::monostate());
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parseNumber(out);
        return error(pos_, "expected a value, found " + describe(pos_));
    }
  }

  template <typename T>
  bool parseLiteral(const char* word, JsonValue* out, T value) {
    size_t length = std::char_traits<char>::length(word);
    if (text_.compare(pos_, length, word) != 0)
      return error(pos_, std::string("invalid literal, expected ") + word);
    pos_ += length;
    out->value_ = value;
    return true;
  }

  bool enter(int depth) {
    if (depth <= limits_.maxDepth) return true;
    return error(pos_, "nesting deeper than " + std::to_string(limits_.maxDepth) + " levels");
  }

  bool parseArray(JsonValue* out, int depth) {
    if (!enter(depth)) return false;
    ++pos_;  // '['
    JsonValue::Array items;
    skipWhitespace();
    if (peek() == ']') {
      ++pos_;
      out->value_ = std::move(items);
      return true;
    }
    for (;;) {
      items.emplace_back();
      if (!parseValue(&items.back(), depth)) return false;
      skipWhitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') break;
      return error(pos_, "expected ',' or ']'");
    }
    ++pos_;
    out->value_ = std::move(items);
    return true;
  }

  bool parseObject(JsonValue* out, int depth) {
    if (!enter(depth)) return false;
    ++pos_;  // '{'
    JsonValue::Object members;
    std::unordered_set<std::string> keys;  // a set, so that a huge hostile object is not quadratic
    skipWhitespace();
    if (peek() == '}') {
      ++pos_;
      out->value_ = std::move(members);
      return true;
    }
    for (;;) {
      skipWhitespace();
      size_t keyOffset = pos_;
      if (peek() != '"') return error(pos_, "expected a string key, found " + describe(pos_));
      std::string key;
      if (!parseString(&key)) return false;
      if (!keys.insert(key).second) return error(keyOffset, "duplicate key \"" + key + "\"");
      skipWhitespace();
      if (peek() != ':') return error(pos_, "expected ':' after the key");
      ++pos_;
      members.emplace_back();
      members.back().first = std::move(key);
      if (!parseValue(&members.back().second, depth)) return false;
      skipWhitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') break;
      return error(pos_, "expected ',' or '}'");
    }
    ++pos_;
    out->value_ = std::move(members);
    return true;
  }

  static int hexValue(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // The code unit of "\uXXXX" at pos_ (which points at the backslash), or -1.
  int parseHex4() {
    if (text_.size() - pos_ < 6) return -1;
    int unit = 0;
    for (size_t i = pos_ + 2; i < pos_ + 6; ++i) {
      int digit = hexValue(static_cast<unsigned char>(text_[i]));
      if (digit < 0) return -1;
      unit = unit * 16 + digit;
    }
    return unit;
  }

  static void appendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // Length of the well-formed UTF-8 sequence at pos_ (no overlongs, surrogates or code points past
  // U+10FFFF), or 0.
  size_t utf8Length() const {
    auto at = [&](size_t i) {
      return pos_ + i < text_.size() ? static_cast<unsigned char>(text_[pos_ + i]) : 0;
    };
    auto tail = [&](size_t i) { return (at(i) & 0xC0) == 0x80; };
    unsigned char c = at(0);
    if (c >= 0xC2 && c <= 0xDF) return tail(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
      unsigned char c1 = at(1);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) return 0;
      return tail(1) && tail(2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
      unsigned char c1 = at(1);
      if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90)) return 0;
      return tail(1) && tail(2) && tail(3) ? 4 : 0;
    }
    return 0;
  }

  bool parseEscape(std::string* out) {
    size_t start = pos_;
    if (pos_ + 1 >= text_.size()) return error(start, "unterminated escape sequence");
    char c = text_[pos_ + 1];
    const char* simple = "\"\"\\\\//b\bf\fn\nr\rt\t";
    for (const char* s = simple; *s; s += 2) {
      if (c == s[0]) {
        out->push_back(s[1]);
        pos_ += 2;
        return true;
      }
    }
    if (c != 'u') return error(start, "invalid escape: backslash followed by " + describe(pos_ + 1));
    int unit = parseHex4();
    if (unit < 0) return error(start, "\\u must be followed by four hex digits");
    pos_ += 6;
    uint32_t cp = static_cast<uint32_t>(unit);
    if (unit >= 0xDC00 && unit <= 0xDFFF) return error(start, "unpaired surrogate in \\u escape");
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      // A high surrogate only makes sense followed by "\u" and a low one: together one code point.
      int low = peek() == '\\' && pos_ + 1 < text_.size() && text_[pos_ + 1] == 'u' ? parseHex4() : -1;
      if (low < 0xDC00 || low > 0xDFFF) return error(start, "unpaired surrogate in \\u escape");
      pos_ += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint32_t>(low) - 0xDC00);
    }
    appendUtf8(cp, out);
    return true;
  }

  bool parseString(std::string* out) {
    size_t start = pos_;
    ++pos_;  // '"'
    for (;;) {
      if (atEnd()) return error(start, "unterminated string");
      unsigned char c = peek();
      if (c == '"') break;
      if (c == '\\') {
        if (!parseEscape(out)) return false;
      } else if (c < 0x20) {
        return error(pos_, "control character " + describe(pos_) + " in a string must be escaped");
      } else if (c < 0x80) {
        out->push_back(static_cast<char>(c));
        ++pos_;
      } else {
        size_t length = utf8Length();
        if (length == 0) return error(pos_, "invalid UTF-8 in a string");
        out->append(text_, pos_, length);
        pos_ += length;
      }
    }
    ++pos_;
    return true;
  }

  bool digitAt(size_t i) const { return i < text_.size() && text_[i] >= '0' && text_[i] <= '9'; }

  bool parseNumber(JsonValue* out) {
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (!digitAt(pos_)) return error(pos_, "expected a digit");
    if (peek() == '0' && digitAt(pos_ + 1)) return error(pos_, "leading zeros are not allowed");
    while (digitAt(pos_)) ++pos_;
    bool integer = true;
    if (peek() == '.') {
      integer = false;
      if (!digitAt(++pos_)) return error(pos_, "expected a digit after '.'");
      while (digitAt(pos_)) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integer = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!digitAt(pos_)) return error(pos_, "expected a digit in the exponent");
      while (digitAt(pos_)) ++pos_;
    }
    JsonValue::Number number{0.0, 0, false};
    if (integer) number.isInteger = parseInt64(start, &number.integer);
    if (number.isInteger) {
      number.value = static_cast<double>(number.integer);
    } else {
      // istringstream with the classic locale: strtod would follow a host application's LC_NUMERIC.
      std::istringstream stream(text_.substr(start, pos_ - start));
      stream.imbue(std::locale::classic());
      stream >> number.value;
      if (stream.fail()) return error(start, "number out of range");
    }
    out->value_ = number;
    return true;
  }

  // The integer literal from `start` to pos_, false when it does not fit in int64_t.
  bool parseInt64(size_t start, int64_t* out) const {
    bool negative = text_[start] == '-';
    // Accumulate negatively: INT64_MIN has no positive counterpart.
    int64_t value = 0;
    for (size_t i = start + (negative ? 1 : 0); i < pos_; ++i) {
      int digit = text_[i] - '0';
      if (value < (INT64_MIN + digit) / 10) return false;
      value = value * 10 - digit;
    }
    if (!negative && value == INT64_MIN) return false;
    *out = negative ? value : -value;
    return true;
  }

  const std::string& text_;
  const JsonLimits& limits_;
  size_t pos_ = 0;
  size_t values_ = 0;
  size_t errorOffset_ = 0;
  std::string errorText_;
};

bool parseJson(const std::string& text, JsonValue* out, std::string* error, const JsonLimits& limits) {
  *out = JsonValue();
  if (text.size() > limits.maxBytes) {
    *error = "document of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
             std::to_string(limits.maxBytes) + " bytes";
    return false;
  }
  JsonParser parser(text, limits);
  JsonValue value;
  if (!parser.parseDocument(&value)) {
    *error = jsonPosition(text, parser.errorOffset()) + ": " + parser.errorText();
    return false;
  }
  *out = std::move(value);
  return true;
}

}  // namespace mscclpp_nccl
