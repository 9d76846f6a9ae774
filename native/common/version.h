// The versions the library reports: the package's (MSCCLPP_NCCL_VERSION, passed by setup.py from
// mscclpp_nccl/__init__.py, the one place it is written) and the NCCL release whose ABI it implements
// (the same as include/nccl.h's NCCL_MAJOR.NCCL_MINOR.NCCL_PATCH; tests/test_log_format.py checks that).
#pragma once

#ifndef MSCCLPP_NCCL_VERSION
#define MSCCLPP_NCCL_VERSION "unknown"
#endif

#define MSCCLPP_NCCL_ABI_VERSION "2.32.3"
