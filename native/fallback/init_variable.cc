#include "native/fallback/init_variable.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace mscclpp_nccl {
namespace {

struct Holders {
  int count = 0;
  bool setByUs = false;  // false: the user had set it, and it is never touched
};

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, Holders>& holders() {
  static std::map<std::string, Holders> byName;
  return byName;
}

}  // namespace

InitVariable::InitVariable(const char* name, const char* value, bool needed) : name_(name) {
  if (!needed) return;
  std::lock_guard<std::mutex> lock(mutex());
  Holders& h = holders()[name];
  if (h.count++ == 0) h.setByUs = getenv(name) == nullptr && setenv(name, value, 0) == 0;
  held_ = true;
}

InitVariable::~InitVariable() {
  if (!held_) return;
  std::lock_guard<std::mutex> lock(mutex());
  Holders& h = holders()[name_];
  if (--h.count == 0 && h.setByUs) {
    unsetenv(name_);
    h.setByUs = false;
  }
}

}  // namespace mscclpp_nccl
