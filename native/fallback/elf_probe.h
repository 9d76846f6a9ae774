// Reading what a shared library declares without loading it: a candidate for the private stock NCCL
// is checked here before any of its code can run (dlopen runs constructors before it returns).
//
// The file is read with bounded pread()s, never mapped or executed, and treated as hostile: every
// offset and size is checked against the file's length, with no arithmetic that can overflow. Only
// 64-bit little-endian ELF of this process's machine is read; anything else is refused with a reason.
// The tables come from the section headers, as readelf reads them; a file stripped of them is refused.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace mscclpp_nccl {

struct ElfLibrary {
  std::string soname;                 // DT_SONAME; "" when the library has none
  std::vector<std::string> defined;   // the names .dynsym defines (not undefined imports), sorted
  std::vector<unsigned char> rodata;  // the .rodata section, when asked for and present

  bool defines(const std::string& name) const;
};

// Reads the ELF file at `path` into `out`; with `withRodata`, also its .rodata (at most `maxRodata`
// bytes; a larger one is left empty). Returns "" or why the file was refused.
std::string readElfLibrary(const std::string& path, bool withRodata, size_t maxRodata, ElfLibrary* out);

}  // namespace mscclpp_nccl
