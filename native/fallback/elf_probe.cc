#include "native/fallback/elf_probe.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace mscclpp_nccl {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the ELF fields are read in host byte order");

namespace {

// No table of a real library comes near these; they bound what a crafted file can make us allocate.
constexpr uint64_t kMaxTableBytes = uint64_t{64} << 20;

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
#elif defined(__powerpc64__)
constexpr uint16_t kMachine = EM_PPC64;
#else
constexpr uint16_t kMachine = EM_NONE;  // unknown here: the loader's own check decides
#endif

class File {
 public:
  explicit File(const std::string& path) : fd_(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY)) {}
  ~File() {
    if (fd_ >= 0) close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // "" once open and known to be a regular file, else why not.
  std::string openError() {
    if (fd_ < 0) return std::string("cannot be opened: ") + strerror(errno);
    struct stat info;
    if (fstat(fd_, &info) != 0) return std::string("cannot be examined: ") + strerror(errno);
    if (!S_ISREG(info.st_mode)) return "is not a regular file";
    size_ = static_cast<uint64_t>(info.st_size);
    return "";
  }

  // Written so that no sum can wrap: offset + bytes <= size.
  bool holds(uint64_t offset, uint64_t bytes) const { return offset <= size_ && bytes <= size_ - offset; }

  bool read(uint64_t offset, void* out, size_t bytes) const {
    if (!holds(offset, bytes)) return false;
    auto* at = static_cast<unsigned char*>(out);
    while (bytes > 0) {
      const ssize_t n = pread(fd_, at, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      at += n;
      offset += static_cast<uint64_t>(n);
      bytes -= static_cast<size_t>(n);
    }
    return true;
  }

  // The bytes of one section, or why not (`what` names it in the reason).
  std::string section(const Elf64_Shdr& header, const char* what, std::vector<unsigned char>* out) const {
    if (header.sh_type == SHT_NOBITS) return std::string("has an empty ") + what;
    if (header.sh_size > kMaxTableBytes) return std::string("has an oversized ") + what;
    out->resize(header.sh_size);
    if (!read(header.sh_offset, out->data(), out->size()))
      return std::string("has a ") + what + " outside the file";
    return "";
  }

 private:
  int fd_;
  uint64_t size_ = 0;
};

// The NUL-terminated string at `offset` of a string table; false when it does not end inside it.
bool stringAt(const std::vector<unsigned char>& table, uint64_t offset, std::string* out) {
  if (offset >= table.size()) return false;
  const unsigned char* start = table.data() + offset;
  const void* end = memchr(start, 0, table.size() - offset);
  if (end == nullptr) return false;
  out->assign(reinterpret_cast<const char*>(start), static_cast<const unsigned char*>(end) - start);
  return true;
}

// What a symbol table's entry exports: defined, not local, visible to other objects.
bool exported(const Elf64_Sym& symbol) {
  const unsigned bind = ELF64_ST_BIND(symbol.st_info);
  const unsigned visibility = ELF64_ST_VISIBILITY(symbol.st_other);
  return symbol.st_shndx != SHN_UNDEF && bind != STB_LOCAL &&
         (visibility == STV_DEFAULT || visibility == STV_PROTECTED);
}

class Reader {
 public:
  explicit Reader(const File& file) : file_(file) {}

  std::string header() {
    if (!file_.read(0, &elf_, sizeof(elf_))) return "is not an ELF file (shorter than its header)";
    if (memcmp(elf_.e_ident, ELFMAG, SELFMAG) != 0) return "is not an ELF file";
    if (elf_.e_ident[EI_CLASS] != ELFCLASS64) return "is not 64-bit ELF";
    if (elf_.e_ident[EI_DATA] != ELFDATA2LSB) return "is not little-endian ELF";
    if (elf_.e_type != ET_DYN)
      return "is not a shared library (ELF type " + std::to_string(elf_.e_type) + ")";
    if (kMachine != EM_NONE && elf_.e_machine != kMachine)
      return "is for another machine (ELF machine " + std::to_string(elf_.e_machine) + ")";
    if (elf_.e_shoff == 0 || elf_.e_shnum == 0) return "has no section headers";
    if (elf_.e_shentsize != sizeof(Elf64_Shdr)) return "has section headers of an unknown size";
    sections_.resize(elf_.e_shnum);
    if (!file_.read(elf_.e_shoff, sections_.data(), sections_.size() * sizeof(Elf64_Shdr)))
      return "has section headers outside the file";
    return "";
  }

  // The first section of `type`, or nullptr.
  const Elf64_Shdr* ofType(uint32_t type) const {
    for (const auto& section : sections_)
      if (section.sh_type == type) return &section;
    return nullptr;
  }

  // The string table a section links to (sh_link), or why not.
  std::string linkedStrings(const Elf64_Shdr& section, const char* what, std::vector<unsigned char>* out) {
    if (section.sh_link >= sections_.size() || sections_[section.sh_link].sh_type != SHT_STRTAB)
      return std::string("has a ") + what + " without a string table";
    return file_.section(sections_[section.sh_link], what, out);
  }

  std::string symbols(std::vector<std::string>* defined) {
    const Elf64_Shdr* table = ofType(SHT_DYNSYM);
    if (table == nullptr) return "has no dynamic symbol table (.dynsym)";
    if (table->sh_entsize != sizeof(Elf64_Sym)) return "has a .dynsym of an unknown entry size";
    std::vector<unsigned char> bytes, names;
    std::string why = file_.section(*table, ".dynsym", &bytes);
    if (why.empty()) why = linkedStrings(*table, ".dynsym", &names);
    if (!why.empty()) return why;
    for (size_t at = 0; at + sizeof(Elf64_Sym) <= bytes.size(); at += sizeof(Elf64_Sym)) {
      Elf64_Sym symbol;
      memcpy(&symbol, bytes.data() + at, sizeof(symbol));
      if (!exported(symbol)) continue;
      std::string name;
      if (!stringAt(names, symbol.st_name, &name)) return "has a .dynsym name outside its string table";
      if (!name.empty()) defined->push_back(std::move(name));
    }
    std::sort(defined->begin(), defined->end());
    defined->erase(std::unique(defined->begin(), defined->end()), defined->end());
    return "";
  }

  std::string soname(std::string* out) {
    const Elf64_Shdr* table = ofType(SHT_DYNAMIC);
    if (table == nullptr) return "has no dynamic section";
    std::vector<unsigned char> bytes, names;
    std::string why = file_.section(*table, "dynamic section", &bytes);
    if (!why.empty()) return why;
    for (size_t at = 0; at + sizeof(Elf64_Dyn) <= bytes.size(); at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry;
      memcpy(&entry, bytes.data() + at, sizeof(entry));
      if (entry.d_tag == DT_NULL) break;
      if (entry.d_tag != DT_SONAME) continue;
      why = linkedStrings(*table, "dynamic section", &names);
      if (!why.empty()) return why;
      if (!stringAt(names, entry.d_un.d_val, out)) return "has a SONAME outside its string table";
      return "";
    }
    return "";
  }

  // The section named `name`, when present and within `maxBytes`; "" or why the names are unreadable.
  std::string named(const char* name, size_t maxBytes, std::vector<unsigned char>* out) {
    if (elf_.e_shstrndx >= sections_.size()) return "has no section name table";
    std::vector<unsigned char> names;
    std::string why = file_.section(sections_[elf_.e_shstrndx], "section name table", &names);
    if (!why.empty()) return why;
    for (const auto& section : sections_) {
      std::string found;
      if (!stringAt(names, section.sh_name, &found) || found != name) continue;
      if (section.sh_type != SHT_PROGBITS || section.sh_size > maxBytes) return "";
      return file_.section(section, name, out);
    }
    return "";
  }

 private:
  const File& file_;
  Elf64_Ehdr elf_{};
  std::vector<Elf64_Shdr> sections_;
};

}  // namespace

bool ElfLibrary::defines(const std::string& name) const {
  return std::binary_search(defined.begin(), defined.end(), name);
}

std::string readElfLibrary(const std::string& path, bool withRodata, size_t maxRodata, ElfLibrary* out) {
  *out = ElfLibrary{};
  File file(path);
  std::string why = file.openError();
  Reader elf(file);
  if (why.empty()) why = elf.header();
  if (why.empty()) why = elf.soname(&out->soname);
  if (why.empty()) why = elf.symbols(&out->defined);
  if (why.empty() && withRodata) why = elf.named(".rodata", maxRodata, &out->rodata);
  return why;
}

}  // namespace mscclpp_nccl
