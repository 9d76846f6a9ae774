// A small, strict JSON (RFC 8259) parser for the files the library reads itself (the tuning table).
// Strict on purpose: a hand-edited file with a trailing comma, a comment or a duplicate key is refused
// with a line and column instead of being half-understood. Limits keep a hostile file from exhausting
// the stack or memory of the process that loaded us.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mscclpp_nccl {

struct JsonLimits {
  size_t maxBytes = 16u << 20;  // document size
  int maxDepth = 64;            // nesting of arrays and objects
  size_t maxValues = 1u << 20;  // values in the whole document (bounds memory at tens of MiB)
};

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<JsonValue>;
  using Member = std::pair<std::string, JsonValue>;
  using Object = std::vector<Member>;  // in document order; keys are unique

  Type type() const { return static_cast<Type>(value_.index()); }
  bool isNull() const { return type() == Type::kNull; }
  bool isBool() const { return type() == Type::kBool; }
  bool isNumber() const { return type() == Type::kNumber; }
  bool isString() const { return type() == Type::kString; }
  bool isArray() const { return type() == Type::kArray; }
  bool isObject() const { return type() == Type::kObject; }
  // A number written as an integer literal (no fraction or exponent) that fits in int64_t; "1.0" and
  // "1e3" are not, so that a field that needs an integer can refuse them.
  bool isInteger() const;

  // Accessors return a zero/empty value when the type differs, so a caller that checked nothing still
  // cannot read out of bounds.
  bool asBool() const;
  double asDouble() const;
  int64_t asInt64() const;  // the exact value when isInteger(), else 0
  const std::string& asString() const;
  const Array& asArray() const;
  const Object& asObject() const;
  // The member named `key` of an object, or nullptr (also when this is not an object).
  const JsonValue* get(const std::string& key) const;

  // Byte offset of the value's first character in the parsed text (see jsonPosition).
  size_t offset() const { return offset_; }

  static const char* typeName(Type type);  // "null", "a boolean", "a number", ...

 private:
  friend class JsonParser;
  struct Number {
    double value;
    int64_t integer;
    bool isInteger;
  };
  std::variant<std::monostate, bool, Number, std::string, Array, Object> value_;
  size_t offset_ = 0;
};

// Parses `text` as one JSON document. On failure returns false, leaves *out null and sets *error to
// "line L, column C: what was wrong". It does not record a last error: the caller adds context.
bool parseJson(const std::string& text, JsonValue* out, std::string* error, const JsonLimits& limits = {});

// "line L, column C" (1-based; columns count UTF-8 characters) of a byte offset into `text`.
std::string jsonPosition(const std::string& text, size_t offset);

}  // namespace mscclpp_nccl
