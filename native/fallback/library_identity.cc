#include "native/fallback/library_identity.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace mscclpp_nccl {
namespace {

bool readAt(int fd, void* buffer, size_t bytes, off_t offset) {
  return pread(fd, buffer, bytes, offset) == static_cast<ssize_t>(bytes);
}

// The build id in one PT_NOTE segment's contents, or "".
std::string buildIdInNotes(const std::vector<unsigned char>& notes) {
  auto align4 = [](size_t n) { return (n + 3) & ~size_t{3}; };
  size_t at = 0;
  while (at + sizeof(Elf64_Nhdr) <= notes.size()) {
    Elf64_Nhdr header;
    memcpy(&header, notes.data() + at, sizeof(header));
    const size_t name = at + sizeof(header);
    const size_t desc = name + align4(header.n_namesz);
    const size_t next = desc + align4(header.n_descsz);
    if (next > notes.size() || next <= at) return "";
    if (header.n_type == NT_GNU_BUILD_ID && header.n_namesz == 4 &&
        memcmp(notes.data() + name, "GNU", 4) == 0) {
      static const char kHex[] = "0123456789abcdef";
      std::string id;
      for (size_t i = 0; i < header.n_descsz; ++i) {
        id += kHex[notes[desc + i] >> 4];
        id += kHex[notes[desc + i] & 15];
      }
      return id;
    }
    at = next;
  }
  return "";
}

}  // namespace

FileIdentity fileIdentity(const std::string& path, std::string* why) {
  FileIdentity id;
  struct stat info;
  if (stat(path.c_str(), &info) != 0) {
    *why = strerror(errno);
  } else if (!S_ISREG(info.st_mode)) {
    *why = "not a regular file";
  } else {
    id = FileIdentity{info.st_dev, info.st_ino, true};
  }
  return id;
}

std::string elfBuildId(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string id;
  Elf64_Ehdr elf;
  // Only 64-bit ELF matters here; the headers are read from the file, never mapped, so a large
  // library costs a few small reads.
  if (readAt(fd, &elf, sizeof(elf), 0) && memcmp(elf.e_ident, ELFMAG, SELFMAG) == 0 &&
      elf.e_ident[EI_CLASS] == ELFCLASS64 && elf.e_phentsize == sizeof(Elf64_Phdr)) {
    for (unsigned i = 0; i < elf.e_phnum && id.empty(); ++i) {
      Elf64_Phdr segment;
      if (!readAt(fd, &segment, sizeof(segment), elf.e_phoff + i * sizeof(segment))) break;
      if (segment.p_type != PT_NOTE || segment.p_filesz > (1u << 16)) continue;
      std::vector<unsigned char> notes(segment.p_filesz);
      if (readAt(fd, notes.data(), notes.size(), segment.p_offset)) id = buildIdInNotes(notes);
    }
  }
  close(fd);
  return id;
}

LoadedObject loadedObjectAt(const void* address) {
  Dl_info info;
  if (address == nullptr || dladdr(address, &info) == 0) return {};
  return {info.dli_fname ? info.dli_fname : "", info.dli_fbase};
}

}  // namespace mscclpp_nccl
