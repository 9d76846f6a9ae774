/* A minimal NVTX tool for tests/test_nvtx.py: loaded through NVTX_INJECTION64_PATH, it records every
   domain created and every range pushed (domain, message, and an extended payload's bytes) as lines
   in the file named by NVTX_RECORD_FILE. */
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static FILE* out;
static const char* domainNames[64];
static int domains;

static const char* nameOf(nvtxDomainHandle_t domain) {
  long index = (long)(intptr_t)domain - 1;
  return index >= 0 && index < domains ? domainNames[index] : "?";
}

static nvtxDomainHandle_t createDomain(const char* name) {
  if (domains == 64) return NULL;
  domainNames[domains] = strdup(name);
  fprintf(out, "domain %s\n", name);
  return (nvtxDomainHandle_t)(intptr_t)(++domains);
}

static int pushRange(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attr) {
  fprintf(out, "push %s %s", nameOf(domain), attr->messageType == NVTX_MESSAGE_TYPE_ASCII ? attr->message.ascii : "?");
  if (attr->payloadType == NVTX_PAYLOAD_TYPE_EXT && attr->reserved0 == 1) {
    const nvtxPayloadData_t* data = (const nvtxPayloadData_t*)(uintptr_t)attr->payload.ullValue;
    fprintf(out, " payload");
    for (size_t i = 0; i < data->size; ++i) fprintf(out, " %02x", ((const unsigned char*)data->payload)[i]);
  }
  fprintf(out, "\n");
  fflush(out);
  return 0;
}

static int popRange(nvtxDomainHandle_t domain) {
  fprintf(out, "pop %s\n", nameOf(domain));
  fflush(out);
  return 0;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
  const char* path = getenv("NVTX_RECORD_FILE");
  out = path ? fopen(path, "w") : NULL;
  if (!out) return 0;
  const NvtxExportTableCallbacks* callbacks = (const NvtxExportTableCallbacks*)getExportTable(NVTX_ETID_CALLBACKS);
  NvtxFunctionTable table = NULL;
  unsigned int size = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)createDomain;
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)pushRange;
  *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)popRange;
  return 1;
}
