// The host half of the device API, compiled by the same nvcc call and against
// the same headers as the kernel, into a small shared library.
//
// ncclDevCommRequirements and ncclDevComm change layout between NCCL releases
// (2.28.3 and 2.28.9 already differ; 2.29 added a versioned header and an
// initializer macro). Keeping every use of them here means the Rust side holds
// no copy of a private NCCL struct: it asks this library how large a
// ncclDevComm is and treats it as opaque bytes that it passes to the kernel.

#include <nccl.h>
#include <nccl_device.h>

extern "C" {

// NCCL_VERSION_CODE of the headers this library was built against.
int devcomm_shim_header_version(void) { return NCCL_VERSION_CODE; }

size_t devcomm_shim_size(void) { return sizeof(ncclDevComm); }
size_t devcomm_shim_align(void) { return alignof(ncclDevComm); }

// The address of ncclGetVersion as this library resolved it: the host checks
// that it is the NCCL instance the host itself loaded.
void* devcomm_shim_nccl_symbol(void) { return (void*)&ncclGetVersion; }

size_t devcomm_shim_ll_handle_size(void) { return sizeof(ncclLLA2AHandle); }

// ncclDevCommCreate with lsaBarrierCount LSA barriers, into `out`
// (devcomm_shim_size() bytes, devcomm_shim_align()-aligned). With llBlocks
// > 0 it also asks for an LL all-to-all staging buffer (the fast kernel's
// one-shot path) of llSlots 8-byte slots per block, and writes its handle
// to `llOut` (devcomm_shim_ll_handle_size() bytes, passed to the kernel).
int devcomm_shim_create(ncclComm_t comm, int lsaBarrierCount, int llBlocks, int llSlots,
                        void* out, void* llOut) {
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;  // 2.29+: sets size, magic, version
#else
  ncclDevCommRequirements reqs = {};  // 2.28: no initializer; all-zero requests nothing
#endif
  reqs.lsaBarrierCount = lsaBarrierCount;
  ncclDevResourceRequirements ll = {};
  if (llBlocks > 0) {
    // Fills the handle's slot count and the buffer's size; ncclDevCommCreate
    // allocates the buffer in every rank's symmetric memory and writes the
    // buffer's handle into the LL handle.
    ncclLLA2AHandle* handle = static_cast<ncclLLA2AHandle*>(llOut);
    ncclResult_t res = ncclLLA2ACreateRequirement(llBlocks, llSlots, handle, &ll);
    if (res != ncclSuccess) return (int)res;
    reqs.resourceRequirementsList = &ll;
  }
  return (int)ncclDevCommCreate(comm, &reqs, static_cast<ncclDevComm*>(out));
}

// The LSA team's size in a device communicator this library created: how
// many ranks this one reaches by loads and stores (its node, at most). The
// host compares it with the communicator's size before launching a kernel.
int devcomm_shim_lsa_size(const void* devComm) {
  return static_cast<const ncclDevComm*>(devComm)->lsaSize;
}

int devcomm_shim_destroy(ncclComm_t comm, const void* devComm) {
  return (int)ncclDevCommDestroy(comm, static_cast<const ncclDevComm*>(devComm));
}

}  // extern "C"
