// A pthread_create for test drivers that refuses threads on demand (EAGAIN, as the system does at a
// process limit). Linked into the driver executable, it comes before libc's, so std::thread reaches it;
// otherwise it hands over to the real one (the sanitizers' where they run).
#pragma once

#include <atomic>

// How many more threads may start: -1 (the default) for no limit, 0 to refuse every one.
extern std::atomic<int> threadsAllowed;
