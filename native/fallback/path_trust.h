// Whether a library file may be loaded into this process, judged by who can change what the path
// names: loading it runs its code with the process's rights, so only a file that nobody but root and
// this user can replace or rewrite is trusted.
//
// Refused: a relative path (it means whatever the working directory holds); a file owned by anyone but
// root or this user, or writable by everyone; a file whose directory is writable by everyone (anyone
// could put a library there or rename one); a file under a world-writable directory without the sticky
// bit (anyone could rename the directory below it). A sticky one such as /tmp is passed: there only
// the owner of an entry may rename or remove it. Symbolic links are resolved first and the target's
// directories judged. Group-writable directories and the owners of directories are not judged.
#pragma once

#include <string>

namespace mscclpp_nccl {

// "" when the file at `path` is trusted, with its path free of symbolic links in `resolved` (the path
// to load, so that what is loaded is what was judged); else why not, read after the path ("<path> lies
// in ...").
std::string untrustedReason(const std::string& path, std::string* resolved);

}  // namespace mscclpp_nccl
