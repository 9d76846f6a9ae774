// Telling shared libraries apart when they export the same names: the same file under another path
// (device and inode), a copy of the same build (the GNU build id), and the loaded object an address
// belongs to. The stock NCCL loader uses these so that it never picks this library itself.
#pragma once

#include <sys/types.h>

#include <string>

namespace mscclpp_nccl {

struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  bool valid = false;  // false: the path could not be stat'ed or is no regular file

  bool sameFile(const FileIdentity& other) const {
    return valid && other.valid && device == other.device && inode == other.inode;
  }
};

// The identity of the file `path` names (symbolic links followed). Where it is invalid, `why` says why.
FileIdentity fileIdentity(const std::string& path, std::string* why);

// The GNU build id of the ELF file at `path`, in hex; "" when it has none or cannot be read. Linkers
// derive it from the contents, so a copy of a library has the same id as the original.
std::string elfBuildId(const std::string& path);

// The loaded object that contains `address`: the file name it was loaded under and its load base
// (base nullptr when the address belongs to no loaded object).
struct LoadedObject {
  std::string path;
  const void* base = nullptr;
};
LoadedObject loadedObjectAt(const void* address);

}  // namespace mscclpp_nccl
