// rm.hpp — the kernel driver's interface as rig's NVIDIA driver calls it: the resource
// manager's (RM's) escapes on /dev/nvidiactl and /dev/nvidia<minor>, and UVM's ioctls on
// /dev/nvidia-uvm (internal to nvgpu/).
//
// Every struct here is rig's own definition of a layout of the 580 driver branch, sized and
// laid out as /work/shared/facts/nv-hopper.md gives them (OGKM = NVIDIA/open-gpu-kernel-modules
// tag 580.142: nv-ioctl.h, nvos.h, the ctrl headers, uvm_ioctl.h). RM takes an allocation's
// parameters by its class and a control's by its exact size, so a layout that differs from the
// running driver's is refused or misread: the device checks the driver's version first
// (device.cpp) and opens only on a version whose layouts are these.
//
// Rm wraps the files of one open device. Each call returns RM's status (0: NV_OK), or, where
// the ioctl itself fails, Error naming the escape and the errno; status_name names a status.
#pragma once

#include <rig/edge.hpp>
#include <rig/os.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace rig::nv::driver {

// ---- Status codes (OGKM src/common/sdk/nvidia/inc/nvstatuscodes.h).
constexpr std::uint32_t kOk = 0;
// "NV_ERR_INVALID_CLASS (0x22)" for the codes the driver meets; "status 0x.." for others.
std::string status_name(std::uint32_t status);

// ---- Escapes: ioctl _IOWR('F', nr, size) (nv-ioctl-numbers.h, nv_escape.h).
constexpr unsigned kEscAllocMemory = 0x27, kEscFree = 0x29, kEscControl = 0x2A, kEscAlloc = 0x2B,
                   kEscMapMemory = 0x4E, kEscUnmapMemory = 0x4F, kEscCardInfo = 200, kEscRegisterFd = 201,
                   kEscCheckVersion = 210, kEscAllocOsEvent = 206, kEscFreeOsEvent = 207, kEscEventData = 0x52,
                   kEscExportDmabuf = 217;  // NV_ESC_EXPORT_TO_DMABUF_FD, NV_IOCTL_BASE + 17
constexpr unsigned long escape(unsigned nr, std::size_t size) {
  return (3ul << 30) | (static_cast<unsigned long>(size) << 16) | (unsigned('F') << 8) | nr;
}
// UVM's ioctl numbers are plain integers (uvm_ioctl.h); INITIALIZE is UVM_INITIALIZE 0x30000001.
constexpr unsigned long kUvmInitialize = 0x30000001, kUvmRegisterGpuVaSpace = 25, kUvmRegisterChannel = 27,
                        kUvmUnregisterChannel = 28, kUvmMapExternal = 33,
                        kUvmFree = 34, kUvmRegisterGpu = 37, kUvmCreateRange = 73, kUvmMmInitialize = 75;

// ---- Classes (OGKM src/common/sdk/nvidia/inc/class/*.h).
constexpr std::uint32_t kRootClient = 0x41, kDevice = 0x80, kSubdevice = 0x2080, kSysmem = 0x3E, kVidmem = 0x40,
                        kOsDescriptor = 0x71, kOsEvent = 0x79, kContextShare = 0x9067, kVaSpace = 0x90F1, kChannelGroup = 0xA06C;

// ---- Controls (cmd numbers from the ctrl headers).
constexpr std::uint32_t kCtrlBuildVersion = 0x101,   // NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION
    kCtrlIdInfoV2 = 0x205,                           // NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2
    kCtrlClassList = 0x800201,                       // NV0080_CTRL_CMD_GPU_GET_CLASSLIST
    kCtrlGidInfo = 0x2080014A,                       // NV2080_CTRL_CMD_GPU_GET_GID_INFO
    kCtrlWorkSubmitToken = 0xC36F0108,               // NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN
    kCtrlSchedule = 0xA06C0101,                      // NVA06C_CTRL_CMD_GPFIFO_SCHEDULE
    kCtrlSetNotification = 0x20800301,               // NV2080_CTRL_CMD_EVENT_SET_NOTIFICATION
    kCtrlTimerGetTime = 0x20800403;                  // NV2080_CTRL_CMD_TIMER_GET_TIME

// ---- Escape structs (nvos.h, nv-ioctl.h).
struct Nvos21 {  // RM_ALLOC
  std::uint32_t hRoot, hObjectParent, hObjectNew, hClass;
  std::uint64_t pAllocParms;
  std::uint32_t paramsSize, status;
};
struct Nvos00 {  // RM_FREE
  std::uint32_t hRoot, hObjectParent, hObjectOld, status;
};
struct Nvos54 {  // RM_CONTROL
  std::uint32_t hClient, hObject, cmd, flags;
  std::uint64_t params;
  std::uint32_t paramsSize, status;
};
struct Nvos33WithFd {  // RM_MAP_MEMORY
  std::uint32_t hClient, hDevice, hMemory, pad;
  std::uint64_t offset, length, pLinearAddress;
  std::uint32_t status, flags;
  std::int32_t fd;
  std::uint32_t pad2;
};
struct Nvos34 {  // RM_UNMAP_MEMORY
  std::uint32_t hClient, hDevice, hMemory, pad;
  std::uint64_t pLinearAddress;
  std::uint32_t status, flags;
};
struct Nvos02WithFd {  // RM_ALLOC_MEMORY
  std::uint32_t hRoot, hObjectParent, hObjectNew, hClass, flags, pad;
  std::uint64_t pMemory, limit;
  std::uint32_t status, pad1;
  std::int32_t fd;
  std::uint32_t pad2;
};
struct RmApiVersion {  // nv_ioctl_rm_api_version_t: CHECK_VERSION_STR
  std::uint32_t cmd, reply;
  char versionString[64];
};
constexpr std::uint32_t kVersionQuery = '2', kVersionRecognized = 1;
struct CardInfo {  // nv_ioctl_card_info_t, 72 B
  std::uint8_t valid, pad[3];
  std::uint32_t domain;  // nv_pci_info_t from here to device_id
  std::uint8_t bus, slot, function, pad1;
  std::uint16_t vendor_id, device_id;
  std::uint32_t gpu_id;
  std::uint16_t interrupt_line;
  std::uint64_t reg_address, reg_size, fb_address, fb_size;
  std::uint32_t minor_number;
  std::uint8_t dev_name[10];
};
constexpr std::size_t kMaxCards = 32;  // NV_MAX_DEVICES
static_assert(sizeof(Nvos21) == 32 && sizeof(Nvos00) == 16 && sizeof(Nvos54) == 32);
static_assert(sizeof(Nvos33WithFd) == 56 && sizeof(Nvos34) == 32 && sizeof(Nvos02WithFd) == 56);
static_assert(sizeof(RmApiVersion) == 72 && sizeof(CardInfo) == 72 && offsetof(CardInfo, gpu_id) == 16 &&
              offsetof(CardInfo, fb_size) == 48 && offsetof(CardInfo, minor_number) == 56);

// NV_ESC_EXPORT_TO_DMABUF_FD's nv_ioctl_export_to_dma_buf_fd_t (nv-ioctl.h, the same layout
// from 580.65 on; gVisor's nvproxy's IoctlExportToDMABufFD_V580 agrees), on /dev/nvidia<minor>
// only (nv.c: the control file answers -EINVAL). It places up to kDmabufMaxHandles pieces
// (handle, offset, size) of the client's memory one after another in a dma-buf of totalSize
// bytes; fd -1 makes a new one (then the new descriptor, O_RDWR | O_CLOEXEC), status is the
// module's. What the module checks (nv-dmabuf.c nv_dma_buf_export / nv_dma_buf_create /
// nv_dma_buf_dup_mem_handles; osapi.c RmDmabufVerifyMemHandle), each NV_ERR_INVALID_ARGUMENT
// unless named: no objects, no size, more than 128 or than totalObjects; a mapping type other
// than DEFAULT or FORCE_PCIE (FORCE_PCIE itself NV_ERR_NOT_SUPPORTED but on CPU-coherent
// systems); an unknown client (NV_ERR_INVALID_CLIENT) or handle (NV_ERR_OBJECT_NOT_FOUND), or
// one that is no memory (NV_ERR_INVALID_OBJECT); an offset or size not a multiple of the OS
// page; memory other than video memory (system memory only on GPUs without their own); a
// size of 0 or a piece past its memory, or pieces that do not add up to totalSize; bAllowMmap
// where the memory cannot be mapped (NV_ERR_NOT_SUPPORTED: the CPU maps such a dma-buf only
// on GPUs without memory of their own).
constexpr std::uint32_t kDmabufMaxHandles = 128;  // NV_DMABUF_EXPORT_MAX_HANDLES
constexpr std::uint8_t kDmabufMappingDefault = 0;  // NV_DMABUF_EXPORT_MAPPING_TYPE_DEFAULT
struct ExportDmabuf {
  std::int32_t fd;
  std::uint32_t hClient, totalObjects, numObjects, index, pad;
  std::uint64_t totalSize;
  std::uint8_t mappingType, bAllowMmap, pad1[2];
  std::uint32_t handles[kDmabufMaxHandles];
  std::uint64_t offsets[kDmabufMaxHandles];  // from 552: 8-aligned
  std::uint64_t sizes[kDmabufMaxHandles];
  std::uint32_t status, pad2;
};
static_assert(sizeof(ExportDmabuf) == 2608 && offsetof(ExportDmabuf, totalSize) == 24 &&
              offsetof(ExportDmabuf, mappingType) == 32 && offsetof(ExportDmabuf, handles) == 36 &&
              offsetof(ExportDmabuf, offsets) == 552 && offsetof(ExportDmabuf, sizes) == 1576 &&
              offsetof(ExportDmabuf, status) == 2600);

struct OsEventParams {  // nv_ioctl_alloc_os_event_t / nv_ioctl_free_os_event_t
  std::uint32_t hClient, hDevice, fd, status;
};
struct EventDataParams {  // NVOS41: GET_EVENT_DATA
  std::uint64_t pEvent;
  std::uint32_t MoreEvents, status;
};
struct EventRecord {  // nv_event_t... as GET_EVENT_DATA writes it: the object, its index, its info
  std::uint32_t hObject, NotifyIndex, info32;
  std::uint16_t info16, pad;
};
static_assert(sizeof(OsEventParams) == 16 && sizeof(EventDataParams) == 16 && sizeof(EventRecord) == 16);

// ---- Allocation parameters.
struct DeviceParams {  // NV0080_ALLOC_PARAMETERS
  std::uint32_t deviceId, hClientShare, hTargetClient, hTargetDevice, flags, pad;
  std::uint64_t vaSpaceSize, vaStartInternal, vaLimitInternal;
  std::uint32_t vaMode, pad1;
};
struct VaSpaceParams {  // NV_VASPACE_ALLOCATION_PARAMETERS
  std::uint32_t index, flags;
  std::uint64_t vaSize, vaStartInternal, vaLimitInternal;
  std::uint32_t bigPageSize, pad;
  std::uint64_t vaBase;
  std::uint32_t pasid, pad1;
};
constexpr std::uint32_t kVaExternallyOwned = 1u << 3, kVaPageFaulting = 1u << 6;
constexpr std::uint64_t kVaBase = 0x1000, kVaSize = 0x1fffffb000000;  // the facts' bring-up, step 11
struct MemoryParams {  // NV_MEMORY_ALLOCATION_PARAMS
  std::uint32_t owner, type, flags, width, height, pitch, attr, attr2, format, comprCovg, zcullCovg, pad;
  std::uint64_t rangeLo, rangeHi, size, alignment, offset, limit, address;
  std::uint32_t ctagOffset, hVASpace, internalflags, tag, numaNode, pad1;
};
// MAP_NOT_REQUIRED | MEMORY_HANDLE_PROVIDED | IGNORE_BANK_PLACEMENT (nvos.h NVOS32_ALLOC_FLAGS_*).
constexpr std::uint32_t kMemoryFlags = 0x8000 | 0x4000 | 1;
// OS descriptors: NONCONTIGUOUS | COHERENCY_CACHED | MAPPING_NO_MAP (NVOS02_FLAGS_*).
constexpr std::uint32_t kOsDescriptorFlags = (1u << 4) | (1u << 12) | (1u << 30);
struct GroupParams {  // NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS
  std::uint32_t hObjectError, hObjectEccError, hVASpace, engineType;
  std::uint8_t bIsCallingContextVgpuPlugin;
};
struct ShareParams {  // NV_CTXSHARE_ALLOCATION_PARAMETERS
  std::uint32_t hVASpace, flags, subctxId;
};
constexpr std::uint32_t kSubcontextAsync = 1;
struct ChannelParams {  // NV_CHANNEL_ALLOC_PARAMS: the facts' offsets, 368 B
  std::uint32_t hObjectError, hObjectBuffer;
  std::uint64_t gpFifoOffset;
  std::uint32_t gpFifoEntries, flags, hContextShare, hVASpace;
  std::uint32_t hUserdMemory[8];
  std::uint64_t userdOffset[8];
  std::uint32_t engineType;
  std::uint8_t rest[368 - 132];
};
constexpr std::uint32_t kEngineGraphics = 1, kEngineCopy0 = 9;  // NV2080_ENGINE_TYPE_*
struct EventParams {  // NV0005_ALLOC_PARAMETERS
  std::uint32_t hParentClient, hSrcResource, hClass, notifyIndex;
  std::uint64_t data;  // the OS event's file
};
// NV2080_NOTIFIERS_GR0, _RC_ERROR (cl2080_notification.h); NV01_EVENT_NONSTALL_INTR in the index.
constexpr std::uint32_t kNotifyGr0 = 12, kNotifyRcError = 37, kNotifyNonstall = 0x08000000;
static_assert(sizeof(DeviceParams) == 56 && sizeof(VaSpaceParams) == 56 && sizeof(MemoryParams) == 128);
static_assert(sizeof(GroupParams) == 20 && sizeof(ShareParams) == 12 && sizeof(ChannelParams) == 368);
static_assert(offsetof(ChannelParams, userdOffset) == 64 && offsetof(ChannelParams, engineType) == 128);

// ---- Control parameters.
struct BuildVersionParams {  // NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_PARAMS (legacy)
  std::uint32_t sizeOfStrings, pad;
  std::uint64_t pDriverVersionBuffer, pVersionBuffer, pTitleBuffer;
  std::uint32_t changelistNumber, officialChangelistNumber;
};
struct IdInfoV2Params {  // NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS
  std::uint32_t gpuId, gpuFlags, deviceInstance, subDeviceInstance, sliStatus, boardId, gpuInstance;
  std::int32_t numaId;
};
struct ClassListParams {  // NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS
  std::uint32_t numClasses, pad;
  std::uint64_t classList;
};
struct GidParams {  // NV2080_CTRL_GPU_GET_GID_INFO_PARAMS
  std::uint32_t index, flags, length;
  std::uint8_t data[256];
};
constexpr std::uint32_t kGidBinary = 2;
struct NotificationParams {  // NV2080_CTRL_EVENT_SET_NOTIFICATION_PARAMS
  std::uint32_t event, action;
  std::uint8_t bNotifyState;
  std::uint32_t info32;
  std::uint16_t info16;
};
constexpr std::uint32_t kNotifyRepeat = 2;  // NV2080_CTRL_EVENT_SET_NOTIFICATION_ACTION_REPEAT
// The error notifier a channel writes when it stops (NvNotification): info32 the Xid at +8,
// status 0xffff at +14 once written.
constexpr std::uint64_t kNotifierInfo32 = 8, kNotifierStatus = 14;
static_assert(sizeof(NotificationParams) == 20);
static_assert(sizeof(BuildVersionParams) == 40 && sizeof(IdInfoV2Params) == 32 && sizeof(ClassListParams) == 16 &&
              sizeof(GidParams) == 268);

// NV2080_CTRL_TIMER_GET_TIME_PARAMS (ctrl2080timer.h): the GPU's timer (PTIMER) in
// nanoseconds, the clock a semaphore release with RELEASE_TIMESTAMP writes.
struct TimerGetTime {
  std::uint64_t time_nsec;
};
static_assert(sizeof(TimerGetTime) == 8);

// ---- UVM parameters (uvm_ioctl.h).
struct UvmInitialize {
  std::uint64_t flags;
  std::uint32_t rmStatus, pad;
};
struct UvmMmInitialize {
  std::int32_t uvmFd;
  std::uint32_t rmStatus;
};
struct UvmRegisterGpu {
  std::uint8_t uuid[16];
  std::uint8_t numaEnabled;
  std::int32_t numaNodeId, rmCtrlFd;
  std::uint32_t hClient, hSmcPartRef, rmStatus;
};
struct UvmRegisterVaSpace {
  std::uint8_t uuid[16];
  std::int32_t rmCtrlFd;
  std::uint32_t hClient, hVaSpace, rmStatus;
};
struct UvmRegisterChannel {
  std::uint8_t uuid[16];
  std::int32_t rmCtrlFd;
  std::uint32_t hClient, hChannel, pad0;
  std::uint64_t base, length;
  std::uint32_t rmStatus, pad1;
};
struct UvmUnregisterChannel {
  std::uint8_t uuid[16];
  std::uint32_t hClient, hChannel, rmStatus;
};
struct UvmRange {  // CREATE_EXTERNAL_RANGE and FREE
  std::uint64_t base, length;
  std::uint32_t rmStatus, pad;
};
struct UvmMapExternal {  // MAP_EXTERNAL_ALLOCATION
  std::uint64_t base, length, offset;
  struct {
    std::uint8_t uuid[16];
    std::uint32_t mappingType, cachingType, format, elementBits, compressionType;
  } perGpuAttributes[256];  // UVM_MAX_GPUS
  std::uint64_t gpuAttributesCount;
  std::int32_t rmCtrlFd;
  std::uint32_t hClient, hMemory, rmStatus;
};
static_assert(sizeof(UvmRegisterChannel) == 56 && offsetof(UvmRegisterChannel, base) == 32 &&
              sizeof(UvmUnregisterChannel) == 28);
static_assert(sizeof(UvmRegisterGpu) == 40 && sizeof(UvmRegisterVaSpace) == 32 && sizeof(UvmRange) == 24 &&
              sizeof(UvmMapExternal) == 9264);

// The files of one device and the calls on them. Results: RM's status, or Error where the
// ioctl failed (naming the escape and the errno).
class Rm {
 public:
  explicit Rm(os::Seam& seam) : seam_(seam) {}
  os::Seam& seam() { return seam_; }
  int ctl = -1;         // /dev/nvidiactl
  int dev = -1;         // /dev/nvidia<minor>, registered to ctl
  int uvm = -1;         // /dev/nvidia-uvm, the VA space file
  int uvm_mm = -1;      // /dev/nvidia-uvm, the mm file
  std::uint32_t root = 0;  // the client

  Result<std::uint32_t> escape(int fd, unsigned nr, void* arg, std::size_t size, const char* what);
  // RM_ALLOC of `klass` under `parent`: the new handle (RM's choice), or Error with the status.
  Result<std::uint32_t> alloc(std::uint32_t parent, std::uint32_t klass, void* params, std::size_t size,
                              const char* what);
  Result<void> control(std::uint32_t object, std::uint32_t cmd, void* params, std::size_t size, const char* what);
  std::uint32_t free(std::uint32_t handle);  // RM's status; the handle and all under it go
  // UVM ioctl `request` on `fd` (-1: the VA space file) with `arg`, whose rmStatus is at
  // `status`: Error where the ioctl fails or the status is not NV_OK.
  Result<void> uvm_call(unsigned long request, void* arg, std::uint32_t* status, const char* what, int fd = -1);

 private:
  os::Seam& seam_;
};

}  // namespace rig::nv::driver
