// A CUDA injection library (CUDA_INJECTION64_PATH) that records when every kernel of a process ran on the
// GPU, through CUPTI's activity records, with no change to the program or to the NCCL library under it:
// nccl-tests against ours and against stock NCCL give comparable timelines. At exit each process writes
// $KERNEL_TRACE_DIR/trace.<rank>.<pid>.csv (rank: OMPI_COMM_WORLD_RANK, else -1), one kernel per line:
// GPU timestamps in ns (queued and submitted: when the launch entered the queue and reached the GPU),
// the grid, the registers per thread and whether it ran from a graph. perf/kernel_trace_summary.py
// reads them.
//
// Build: g++ -O2 -shared -fPIC -I$CUDA/include perf/kernel_trace.cc -L$CUDA/lib -lcupti -o kernel_trace.so
#include <cupti.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

constexpr size_t kBufferBytes = 8 << 20;
std::mutex outputLock;
FILE* output = nullptr;

void CUPTIAPI giveBuffer(uint8_t** buffer, size_t* size, size_t* maxRecords) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxRecords = 0;
}

void CUPTIAPI takeBuffer(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t validSize) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> hold(outputLock);
  while (output && cuptiActivityGetNextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    fprintf(output, "%s,%llu,%llu,%llu,%llu,%u,%u,%d,%d,%u,%u\n", k->name ? k->name : "?",
            static_cast<unsigned long long>(k->queued), static_cast<unsigned long long>(k->submitted),
            static_cast<unsigned long long>(k->start), static_cast<unsigned long long>(k->end), k->streamId,
            k->graphId, k->gridX, k->blockX, static_cast<unsigned>(k->registersPerThread), k->correlationId);
  }
  free(buffer);
}

void flushAtExit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> hold(outputLock);
  if (output) fclose(output);
  output = nullptr;
}

}  // namespace

extern "C" int InitializeInjection() {
  const char* dir = getenv("KERNEL_TRACE_DIR");
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  std::string path = std::string(dir ? dir : ".") + "/trace." + (rank ? rank : "-1") + "." +
                     std::to_string(getpid()) + ".csv";
  output = fopen(path.c_str(), "w");
  if (!output) return 0;
  fprintf(output, "name,queued,submitted,start,end,stream,graph,grid,block,registers,correlation\n");
  if (cuptiActivityRegisterCallbacks(giveBuffer, takeBuffer) != CUPTI_SUCCESS ||
      cuptiActivityEnableLatencyTimestamps(1) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    fprintf(output, "# CUPTI refused the activity records\n");
    return 0;
  }
  atexit(flushAtExit);
  return 1;
}
