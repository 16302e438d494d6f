// Compiled by NVRTC in the tests (the jit route has no shim): checks that the
// layout Rust declares for ncclDevCommRequirements (device_build/src/shim.rs,
// DevCommRequirements) and the size it assumes for ncclDevComm are the real
// header's. A mismatch fails the compile with the assertion's text.
#include <nccl_device/utility.h>
#include <nccl_device/coop.h>
#include <nccl_device/core.h>
#include <nccl_device_wrapper.h>
#include <nccl_device/host.h>

#define OFF(field) __builtin_offsetof(ncclDevCommRequirements, field)
static_assert(NCCL_VERSION_CODE == 23203, "the layout below is 2.32.3's");
static_assert(sizeof(ncclDevComm) == 248 && alignof(ncclDevComm) == 8, "ncclDevComm");
static_assert(__builtin_offsetof(ncclDevComm, nRanks) == 12 &&
              __builtin_offsetof(ncclDevComm, lsaRank) == 20 &&
              __builtin_offsetof(ncclDevComm, lsaSize) == 24, "ncclDevComm team fields");
static_assert(sizeof(ncclDevCommRequirements) == 120, "ncclDevCommRequirements size");
static_assert(OFF(resourceRequirementsList) == 16 && OFF(teamRequirementsList) == 24 &&
              OFF(lsaMultimem) == 32 && OFF(barrierCount) == 36 && OFF(lsaBarrierCount) == 40 &&
              OFF(railGinBarrierCount) == 44 && OFF(lsaLLA2ABlockCount) == 48 &&
              OFF(lsaLLA2ASlotCount) == 52 && OFF(ginForceEnable) == 56 &&
              OFF(ginContextCount) == 60 && OFF(ginSignalCount) == 64 &&
              OFF(ginCounterCount) == 68 && OFF(ginConnectionType) == 72 &&
              OFF(ginExclusiveContexts) == 76 && OFF(ginQueueDepth) == 80 &&
              OFF(ginTrafficClass) == 84 && OFF(worldGinBarrierCount) == 88 &&
              OFF(ginStrongSignalsRequired) == 92 && OFF(ginVaSignalsRequired) == 93 &&
              OFF(ginCustomStride) == 96 && OFF(ginType) == 100 && OFF(useRuntimeVersion) == 104 &&
              OFF(cftCaps) == 108 && OFF(cftBarrierCount) == 112,
              "ncclDevCommRequirements offsets");
static_assert(NCCL_API_MAGIC == 0xcafebeef && NCCL_CONFIG_UNDEF_INT == INT_MIN, "initializer values");
static_assert((int)NCCL_GIN_CONNECTION_NONE == 0 && (int)NCCL_GIN_TYPE_NONE == 0 &&
              (int)NCCL_CFT_NONE == 0, "initializer enums");

extern "C" __global__ void devcomm_layout_probe() {}
