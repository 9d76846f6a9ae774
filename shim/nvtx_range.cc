#include "shim/nvtx_range.h"

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <cstddef>

#include "native/common/data_type.h"

namespace {

nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t handle = nvtxDomainCreateA("NCCL");
  return handle;
}

uint64_t payloadSchema() {
  static const uint64_t id = [] {
    static const nvtxPayloadSchemaEntry_t entries[] = {
        {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "Communicator", nullptr, 0, offsetof(CallPayload, comm), nullptr,
         nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "Message size [bytes]", nullptr, 0, offsetof(CallPayload, bytes),
         nullptr, nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "Datatype", nullptr, 0, offsetof(CallPayload, datatype), nullptr,
         nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "Reduction operation", nullptr, 0, offsetof(CallPayload, op),
         nullptr, nullptr},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "Root or peer", nullptr, 0, offsetof(CallPayload, root), nullptr,
         nullptr},
    };
    nvtxPayloadSchemaAttr_t attr{};
    attr.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                     NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                     NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE;
    attr.name = "NCCL call";
    attr.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
    attr.entries = entries;
    attr.numEntries = sizeof(entries) / sizeof(entries[0]);
    attr.payloadStaticSize = sizeof(CallPayload);
    return nvtxPayloadSchemaRegister(domain(), &attr);
  }();
  return id;
}

nvtxEventAttributes_t named(const char* function) {
  nvtxEventAttributes_t attr{};
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = function;
  return attr;
}

}  // namespace

CallPayload callPayload(ncclComm_t comm, size_t count, ncclDataType_t type, int op, int root) {
  const bool known = type >= 0 && type < ncclNumTypes;  // a bad type is reported by the call itself
  const size_t size = known ? mscclpp_nccl::dataTypeSize(static_cast<mscclpp_nccl::DataType>(type)) : 0;
  return {reinterpret_cast<uintptr_t>(comm), count * size, static_cast<int32_t>(type), op, root};
}

ApiRange::ApiRange(const char* function) {
  nvtxEventAttributes_t attr = named(function);
  nvtxDomainRangePushEx(domain(), &attr);
}

ApiRange::ApiRange(const char* function, const CallPayload& payload) {
  nvtxEventAttributes_t attr = named(function);
  nvtxPayloadData_t data;
  NVTX_PAYLOAD_EVTATTR_SET_DATA(attr, &data, payloadSchema(), &payload, sizeof(payload))
  nvtxDomainRangePushEx(domain(), &attr);
}

ApiRange::~ApiRange() { nvtxDomainRangePop(domain()); }
