// Exported entry points that mscclpp-nccl does not implement (yet). They exist so that the library
// exports exactly what stock libnccl.so.2 exports: a program or a wrapper (profilers, PyTorch's
// dlsym-based probes) that resolves one of them gets a clean ncclInvalidUsage with ncclGetLastError
// naming the function, rather than a failed symbol lookup at load time.

// Makes include/nccl.h declare ncclResetDebugInit (instead of defining it away as an empty macro).
#define NCCL_OS_LINUX 1

#include <cstdint>

#include "shim/api.h"
#include "shim/team.h"

namespace {

// Minimal stand-ins for the device-API types (stock nccl_device/*.h) that the host functions below
// take or return. Only what crosses the C calling convention matters: structs passed or returned by
// value keep stock's layout, everything behind a pointer stays opaque.
struct MultimemHandle {  // ncclMultimemHandle_t
  void* mcBasePtr;
};
enum CftTeamMode : int {};       // ncclCftTeamMode_t
typedef uint32_t CftLeId;        // ncclCftLeId
struct DevCommRequirements;      // ncclDevCommRequirements_t
struct DevComm;                  // ncclDevComm_t
struct DevResourceRequirements;  // ncclDevResourceRequirements_t
struct LsaBarrierHandle;         // ncclLsaBarrierHandle_t
struct GinBarrierHandle;         // ncclGinBarrierHandle_t
struct LLA2AHandle;              // ncclLLA2AHandle_t
struct GinOutboxHandle;          // ncclGinOutboxHandle
struct GinInboxA2AHandle;        // ncclGinInboxA2AHandle

Team noTeam(const char* function) {
  notImplemented(function);
  return Team{0, 0, 0};
}

int noRank(const char* function) {
  notImplemented(function);
  return -1;
}

}  // namespace

// ---- Debug re-initialisation --------------------------------------------------------------------

// Logging reads NCCL_DEBUG when first used; there is nothing to reset.
NCCL_API(void, ncclResetDebugInit, (void)) {}

// Stock exports this one strong and without a p-twin.
extern "C" __attribute__((visibility("default"))) void ncclResetDebugInitInternal(void) {}

// ---- nccl_device/host.h: device communicators ---------------------------------------------------

NCCL_API(ncclResult_t, ncclDevCommCreate,
         (ncclComm_t comm, const DevCommRequirements* reqs, DevComm* outDevComm), comm, reqs, outDevComm) {
  return notImplemented("ncclDevCommCreate");
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, (ncclComm_t comm, const DevComm* devComm), comm, devComm) {
  return notImplemented("ncclDevCommDestroy");
}

// ---- nccl_device/host.h: window pointers --------------------------------------------------------

NCCL_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, (ncclWindow_t window, size_t offset, void** outPtr),
         window, offset, outPtr) {
  return notImplemented("ncclGetLsaMultimemDevicePointer");
}

NCCL_API(ncclResult_t, ncclGetMultimemDevicePointer,
         (ncclWindow_t window, size_t offset, MultimemHandle multimem, void** outPtr), window, offset,
         multimem, outPtr) {
  return notImplemented("ncclGetMultimemDevicePointer");
}

NCCL_API(ncclResult_t, ncclGetMultimemDeviceLeInfo,
         (ncclWindow_t window, size_t offset, CftLeId* leId, size_t* leOffset), window, offset, leId,
         leOffset) {
  return notImplemented("ncclGetMultimemDeviceLeInfo");
}

NCCL_API(ncclResult_t, ncclGetCftDeviceLeInfo,
         (ncclWindow_t window, size_t offset, int peerCft, Team cftTeam, CftLeId* leId, size_t* leOffset),
         window, offset, peerCft, cftTeam, leId, leOffset) {
  return notImplemented("ncclGetCftDeviceLeInfo");
}

NCCL_API(ncclResult_t, ncclGetPeerDeviceLeInfo,
         (ncclWindow_t window, size_t offset, int peerWorld, CftLeId* leId, size_t* leOffset), window, offset,
         peerWorld, leId, leOffset) {
  return notImplemented("ncclGetPeerDeviceLeInfo");
}

// ---- nccl_device/host.h: teams ------------------------------------------------------------------

NCCL_API(Team, ncclTeamCft, (ncclComm_t comm, CftTeamMode mode), comm, mode) { return noTeam("ncclTeamCft"); }

NCCL_API(Team, ncclTeamCftMultimem, (ncclComm_t comm), comm) { return noTeam("ncclTeamCftMultimem"); }

// ---- nccl_device/host.h: device resource requirements -------------------------------------------
// Stock declares the GIN outbox/inbox pair only for Windows builds but exports it everywhere.

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement,
         (Team team, int nBarriers, LsaBarrierHandle* outHandle, DevResourceRequirements* outReq), team,
         nBarriers, outHandle, outReq) {
  return notImplemented("ncclLsaBarrierCreateRequirement");
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement,
         (ncclComm_t comm, Team team, int nBarriers, GinBarrierHandle* outHandle,
          DevResourceRequirements* outReq),
         comm, team, nBarriers, outHandle, outReq) {
  return notImplemented("ncclGinBarrierCreateRequirement");
}

NCCL_API(int, ncclLLA2ACalcSlots, (int maxElts, int maxEltSize), maxElts, maxEltSize) {
  return noRank("ncclLLA2ACalcSlots");
}

NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement,
         (int nBlocks, int nSlots, LLA2AHandle* outHandle, DevResourceRequirements* outReq), nBlocks, nSlots,
         outHandle, outReq) {
  return notImplemented("ncclLLA2ACreateRequirement");
}

NCCL_API(ncclResult_t, ncclGinOutboxCreateRequirement,
         (int nBlocks, int size_log2, GinOutboxHandle* outHandle, DevResourceRequirements* outReq), nBlocks,
         size_log2, outHandle, outReq) {
  return notImplemented("ncclGinOutboxCreateRequirement");
}

NCCL_API(ncclResult_t, ncclGinInboxA2ACreateRequirement,
         (Team peers, int nBlocks, int size_log2, GinInboxA2AHandle* outHandle,
          DevResourceRequirements* outReq),
         peers, nBlocks, size_log2, outHandle, outReq) {
  return notImplemented("ncclGinInboxA2ACreateRequirement");
}
