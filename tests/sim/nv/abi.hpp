// abi.hpp — the simulated NVIDIA kernel interface as the simulator reads it: escape and
// control numbers, classes, status codes and the parameter structs of the 580 driver
// branch, written here as the simulator's own definitions (independent of any driver code
// in rig), each struct's size and key offsets checked against the sizes the facts give.
//
// Sources: OGKM = NVIDIA/open-gpu-kernel-modules tag 580.142 — nv-ioctl.h,
// nv-ioctl-numbers.h, nv_escape.h, nv-unix-nvos-params-wrappers.h, nvos.h, nvstatuscodes.h,
// alloc/alloc_channel.h, class/cl*.h, ctrl/ctrl*.h, kernel-open/nvidia-uvm/uvm_ioctl.h,
// uvm_linux_ioctl.h, uvm_types.h; /work/shared/facts/nv-hopper.md for the sizes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rig::sim::nv::abi {

// ---- Status codes (OGKM nvstatuscodes.h).
inline constexpr std::uint32_t NV_OK = 0x00;
inline constexpr std::uint32_t NV_ERR_BUSY_RETRY = 0x03;
inline constexpr std::uint32_t NV_ERR_GPU_UUID_NOT_FOUND = 0x12;
inline constexpr std::uint32_t NV_ERR_ILLEGAL_ACTION = 0x16;
inline constexpr std::uint32_t NV_ERR_IN_USE = 0x17;
inline constexpr std::uint32_t NV_ERR_INSERT_DUPLICATE_NAME = 0x19;
inline constexpr std::uint32_t NV_ERR_INSUFFICIENT_RESOURCES = 0x1A;
inline constexpr std::uint32_t NV_ERR_INVALID_ADDRESS = 0x1E;
inline constexpr std::uint32_t NV_ERR_INVALID_ARGUMENT = 0x1F;
inline constexpr std::uint32_t NV_ERR_INVALID_CHANNEL = 0x21;
inline constexpr std::uint32_t NV_ERR_INVALID_CLASS = 0x22;
inline constexpr std::uint32_t NV_ERR_INVALID_CLIENT = 0x23;
inline constexpr std::uint32_t NV_ERR_INVALID_DEVICE = 0x26;
inline constexpr std::uint32_t NV_ERR_INVALID_FLAGS = 0x29;
inline constexpr std::uint32_t NV_ERR_INVALID_LIMIT = 0x2E;
inline constexpr std::uint32_t NV_ERR_INVALID_OBJECT = 0x31;
inline constexpr std::uint32_t NV_ERR_INVALID_OBJECT_HANDLE = 0x33;
inline constexpr std::uint32_t NV_ERR_INVALID_OBJECT_PARENT = 0x36;
inline constexpr std::uint32_t NV_ERR_INVALID_OFFSET = 0x37;
inline constexpr std::uint32_t NV_ERR_INVALID_PARAM_STRUCT = 0x3A;
inline constexpr std::uint32_t NV_ERR_INVALID_STATE = 0x40;
inline constexpr std::uint32_t NV_ERR_NO_MEMORY = 0x51;
inline constexpr std::uint32_t NV_ERR_NOT_SUPPORTED = 0x56;
inline constexpr std::uint32_t NV_ERR_OBJECT_NOT_FOUND = 0x57;
inline constexpr std::uint32_t NV_ERR_OPERATING_SYSTEM = 0x59;
inline constexpr std::uint32_t NV_ERR_STATE_IN_USE = 0x63;
inline constexpr std::uint32_t NV_ERR_UVM_ADDRESS_IN_USE = 0x68;

// ---- Escapes: _IOWR('F', nr, size) on /dev/nvidiactl and /dev/nvidiaN (nv-ioctl-numbers.h,
// nv_escape.h).
inline constexpr unsigned kIoctlMagic = 'F';
inline constexpr unsigned NV_ESC_RM_ALLOC_MEMORY = 0x27;
inline constexpr unsigned NV_ESC_RM_FREE = 0x29;
inline constexpr unsigned NV_ESC_RM_CONTROL = 0x2A;
inline constexpr unsigned NV_ESC_RM_ALLOC = 0x2B;
inline constexpr unsigned NV_ESC_RM_MAP_MEMORY = 0x4E;
inline constexpr unsigned NV_ESC_RM_UNMAP_MEMORY = 0x4F;
inline constexpr unsigned NV_ESC_RM_GET_EVENT_DATA = 0x52;
inline constexpr unsigned NV_ESC_RM_MAP_MEMORY_DMA = 0x57;
inline constexpr unsigned NV_ESC_RM_UNMAP_MEMORY_DMA = 0x58;
inline constexpr unsigned NV_ESC_CARD_INFO = 200;
inline constexpr unsigned NV_ESC_REGISTER_FD = 201;
inline constexpr unsigned NV_ESC_ALLOC_OS_EVENT = 206;
inline constexpr unsigned NV_ESC_FREE_OS_EVENT = 207;
inline constexpr unsigned NV_ESC_CHECK_VERSION_STR = 210;
inline constexpr unsigned NV_ESC_IOCTL_XFER_CMD = 211;
inline constexpr unsigned NV_ESC_ATTACH_GPUS_TO_FD = 212;
inline constexpr unsigned NV_ESC_EXPORT_TO_DMABUF_FD = 217;  // NV_IOCTL_BASE + 17

// ---- UVM ioctls: raw numbers (uvm_ioctl.h, uvm_linux_ioctl.h).
inline constexpr unsigned long UVM_INITIALIZE = 0x30000001;
inline constexpr unsigned long UVM_REGISTER_GPU_VASPACE = 25;
inline constexpr unsigned long UVM_REGISTER_CHANNEL = 27;
inline constexpr unsigned long UVM_UNREGISTER_CHANNEL = 28;
inline constexpr unsigned long UVM_MAP_EXTERNAL_ALLOCATION = 33;
inline constexpr unsigned long UVM_FREE = 34;
inline constexpr unsigned long UVM_REGISTER_GPU = 37;
inline constexpr unsigned long UVM_CREATE_EXTERNAL_RANGE = 73;
inline constexpr unsigned long UVM_MM_INITIALIZE = 75;

// ---- Classes (class/cl*.h).
inline constexpr std::uint32_t NV01_ROOT_CLIENT = 0x41;
inline constexpr std::uint32_t NV01_DEVICE_0 = 0x80;
inline constexpr std::uint32_t NV20_SUBDEVICE_0 = 0x2080;
inline constexpr std::uint32_t NV01_MEMORY_SYSTEM = 0x3E;
inline constexpr std::uint32_t NV01_MEMORY_LOCAL_PRIVILEGED = 0x3F;
inline constexpr std::uint32_t NV01_MEMORY_LOCAL_USER = 0x40;
inline constexpr std::uint32_t NV01_MEMORY_VIRTUAL = 0x70;
inline constexpr std::uint32_t NV01_MEMORY_SYSTEM_OS_DESCRIPTOR = 0x71;
inline constexpr std::uint32_t NV01_EVENT_OS_EVENT = 0x79;
inline constexpr std::uint32_t GT200_DEBUGGER = 0x83DE;
inline constexpr std::uint32_t FERMI_CONTEXT_SHARE_A = 0x9067;
inline constexpr std::uint32_t FERMI_VASPACE_A = 0x90F1;
inline constexpr std::uint32_t KEPLER_CHANNEL_GROUP_A = 0xA06C;

// ---- Controls (ctrl/ctrl*.h).
inline constexpr std::uint32_t NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION = 0x101;
inline constexpr std::uint32_t NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2 = 0x13E;
inline constexpr std::uint32_t NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 = 0x205;
inline constexpr std::uint32_t NV0080_CTRL_CMD_GPU_GET_CLASSLIST = 0x800201;
inline constexpr std::uint32_t NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2 = 0x800292;
inline constexpr std::uint32_t NV2080_CTRL_CMD_GPU_GET_GID_INFO = 0x2080014A;
inline constexpr std::uint32_t NV2080_CTRL_CMD_EVENT_SET_NOTIFICATION = 0x20800301;
inline constexpr std::uint32_t NV2080_CTRL_CMD_TIMER_GET_TIME = 0x20800403;
inline constexpr std::uint32_t NV2080_CTRL_CMD_GR_GET_INFO = 0x20801201;
inline constexpr std::uint32_t NV2080_CTRL_CMD_PERF_BOOST = 0x2080200A;
inline constexpr std::uint32_t NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN = 0xC36F0108;
inline constexpr std::uint32_t NVA06C_CTRL_CMD_GPFIFO_SCHEDULE = 0xA06C0101;

// ---- Field values.
inline constexpr std::uint32_t NV_RM_API_VERSION_CMD_STRICT = 0;
inline constexpr std::uint32_t NV_RM_API_VERSION_CMD_RELAXED = '1';
inline constexpr std::uint32_t NV_RM_API_VERSION_CMD_QUERY = '2';
inline constexpr std::uint32_t NV_RM_API_VERSION_REPLY_UNRECOGNIZED = 0;
inline constexpr std::uint32_t NV_RM_API_VERSION_REPLY_RECOGNIZED = 1;
inline constexpr std::uint32_t NV01_EVENT_NONSTALL_INTR = 0x08000000;  // nvos.h, in notifyIndex
inline constexpr std::uint32_t kEventFlagsMask = 0xFF000000;          // nvos.h NV01_EVENT_* bits
inline constexpr std::uint32_t NV2080_NOTIFIERS_GR0 = 12;              // cl2080_notification.h
inline constexpr std::uint32_t NV2080_NOTIFIERS_CE0 = 23;
inline constexpr std::uint32_t NV2080_NOTIFIERS_RC_ERROR = 37;
inline constexpr std::uint32_t NV2080_NOTIFIERS_MAXCOUNT = 198;
inline constexpr std::uint32_t NV2080_CTRL_EVENT_SET_NOTIFICATION_ACTION_REPEAT = 2;
inline constexpr std::uint32_t NV2080_CTRL_GR_INFO_INDEX_MAX = 0x39;  // ctrl0080gr.h
inline constexpr std::uint32_t NV2080_CTRL_GR_INFO_INDEX_SM_VERSION = 0x0C;
inline constexpr std::uint32_t NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE = 200;
inline constexpr std::uint32_t NV2080_GPU_MAX_GID_LENGTH = 0x100;
inline constexpr std::uint32_t NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY = 2;  // bits 1:0
inline constexpr std::uint32_t kUuidBytes = 16;
inline constexpr std::uint32_t NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED = 1u << 3;  // nvos.h
inline constexpr std::uint32_t NV_VASPACE_ALLOCATION_FLAGS_ENABLE_PAGE_FAULTING = 1u << 6;
inline constexpr std::uint32_t NV2080_ENGINE_TYPE_GRAPHICS = 1;  // cl2080_notification.h
inline constexpr std::uint32_t NV2080_ENGINE_TYPE_COPY0 = 9;     // COPY0..COPY9 are 9..18
inline constexpr std::uint32_t NV2080_ENGINE_TYPE_COPY9 = 18;
inline constexpr std::uint32_t UVM_MAX_GPUS = 256;  // uvm_types.h: NV_MAX_DEVICES * 8

// ---- Escape parameter structs.
struct nv_ioctl_xfer {
  std::uint32_t cmd;
  std::uint32_t size;
  std::uint64_t ptr;
};
static_assert(sizeof(nv_ioctl_xfer) == 16);

struct nv_pci_info {
  std::uint32_t domain;
  std::uint8_t bus, slot, function;
  std::uint16_t vendor_id, device_id;
};
struct nv_ioctl_card_info {
  std::uint8_t valid;
  nv_pci_info pci_info;
  std::uint32_t gpu_id;
  std::uint16_t interrupt_line;
  std::uint64_t reg_address, reg_size, fb_address, fb_size;
  std::uint32_t minor_number;
  std::uint8_t dev_name[10];
};
static_assert(sizeof(nv_ioctl_card_info) == 72);
static_assert(offsetof(nv_ioctl_card_info, gpu_id) == 16);
static_assert(offsetof(nv_ioctl_card_info, fb_size) == 48);
static_assert(offsetof(nv_ioctl_card_info, minor_number) == 56);

struct nv_ioctl_rm_api_version {
  std::uint32_t cmd;
  std::uint32_t reply;
  char versionString[64];
};
static_assert(sizeof(nv_ioctl_rm_api_version) == 72);

struct nv_ioctl_register_fd {
  std::int32_t ctl_fd;
};
static_assert(sizeof(nv_ioctl_register_fd) == 4);

// nv_ioctl_export_to_dma_buf_fd_t (nv-ioctl.h; the same from 580.65 to 595): up to
// NV_DMABUF_EXPORT_MAX_HANDLES pieces of RM memory, (handle, offset, size) each, placed one
// after another in a dma-buf of totalSize bytes; fd -1 makes a new dma-buf, fd >= 0 adds
// pieces to one made with fewer than totalObjects. mappingType: DEFAULT 0 or FORCE_PCIE 1.
inline constexpr std::uint32_t NV_DMABUF_EXPORT_MAX_HANDLES = 128;
inline constexpr std::uint8_t NV_DMABUF_EXPORT_MAPPING_TYPE_DEFAULT = 0;
inline constexpr std::uint8_t NV_DMABUF_EXPORT_MAPPING_TYPE_FORCE_PCIE = 1;
struct nv_ioctl_export_to_dma_buf_fd {
  std::int32_t fd;
  std::uint32_t hClient, totalObjects, numObjects, index, pad0;
  std::uint64_t totalSize;
  std::uint8_t mappingType, bAllowMmap, pad1[2];
  std::uint32_t handles[NV_DMABUF_EXPORT_MAX_HANDLES];
  std::uint32_t pad2;
  std::uint64_t offsets[NV_DMABUF_EXPORT_MAX_HANDLES];
  std::uint64_t sizes[NV_DMABUF_EXPORT_MAX_HANDLES];
  std::uint32_t status, pad3;
};
static_assert(sizeof(nv_ioctl_export_to_dma_buf_fd) == 2608 && offsetof(nv_ioctl_export_to_dma_buf_fd, handles) == 36 &&
              offsetof(nv_ioctl_export_to_dma_buf_fd, offsets) == 552 &&
              offsetof(nv_ioctl_export_to_dma_buf_fd, sizes) == 1576 &&
              offsetof(nv_ioctl_export_to_dma_buf_fd, status) == 2600);

struct nv_ioctl_os_event {  // nv_ioctl_alloc_os_event_t and nv_ioctl_free_os_event_t
  std::uint32_t hClient, hDevice, fd, Status;
};
static_assert(sizeof(nv_ioctl_os_event) == 16);

struct NVOS00 {  // RM_FREE
  std::uint32_t hRoot, hObjectParent, hObjectOld, status;
};
static_assert(sizeof(NVOS00) == 16);

struct NVOS21 {  // RM_ALLOC
  std::uint32_t hRoot, hObjectParent, hObjectNew, hClass;
  std::uint64_t pAllocParms;
  std::uint32_t paramsSize, status;
};
static_assert(sizeof(NVOS21) == 32);

struct NVOS64 {  // RM_ALLOC, with rights
  std::uint32_t hRoot, hObjectParent, hObjectNew, hClass;
  std::uint64_t pAllocParms, pRightsRequested;
  std::uint32_t paramsSize, flags, status;
  std::uint32_t pad;
};
static_assert(sizeof(NVOS64) == 48 && offsetof(NVOS64, status) == 40);

struct NVOS54 {  // RM_CONTROL
  std::uint32_t hClient, hObject, cmd, flags;
  std::uint64_t params;
  std::uint32_t paramsSize, status;
};
static_assert(sizeof(NVOS54) == 32);

struct NVOS02 {  // RM_ALLOC_MEMORY
  std::uint32_t hRoot, hObjectParent, hObjectNew, hClass, flags;
  std::uint32_t pad0;
  std::uint64_t pMemory, limit;
  std::uint32_t status, pad1;
};
static_assert(sizeof(NVOS02) == 48 && offsetof(NVOS02, pMemory) == 24);
struct NVOS02_with_fd {
  NVOS02 params;
  std::int32_t fd;
  std::uint32_t pad;
};
static_assert(sizeof(NVOS02_with_fd) == 56);

struct NVOS33 {  // RM_MAP_MEMORY
  std::uint32_t hClient, hDevice, hMemory, pad0;
  std::uint64_t offset, length, pLinearAddress;
  std::uint32_t status, flags;
};
static_assert(sizeof(NVOS33) == 48 && offsetof(NVOS33, pLinearAddress) == 32);
struct NVOS33_with_fd {
  NVOS33 params;
  std::int32_t fd;
  std::uint32_t pad;
};
static_assert(sizeof(NVOS33_with_fd) == 56);

struct NVOS34 {  // RM_UNMAP_MEMORY
  std::uint32_t hClient, hDevice, hMemory, pad0;
  std::uint64_t pLinearAddress;
  std::uint32_t status, flags;
};
static_assert(sizeof(NVOS34) == 32);

// GET_EVENT_DATA (NVOS41): where to copy the next event's data and how much.
struct NVOS41 {
  std::uint64_t pEvent;
  std::uint32_t MoreEvents, status;
};
static_assert(sizeof(NVOS41) == 16);

// ---- Allocation parameters.
struct NV0080_ALLOC_PARAMETERS {
  std::uint32_t deviceId, hClientShare, hTargetClient, hTargetDevice, flags, pad0;
  std::uint64_t vaSpaceSize, vaStartInternal, vaLimitInternal;
  std::uint32_t vaMode, pad1;
};
static_assert(sizeof(NV0080_ALLOC_PARAMETERS) == 56);

struct NV2080_ALLOC_PARAMETERS {
  std::uint32_t subDeviceId;
};
static_assert(sizeof(NV2080_ALLOC_PARAMETERS) == 4);

struct NV_HOPPER_USERMODE_A_PARAMS {
  std::uint8_t bBar1Mapping, bPriv;
};
static_assert(sizeof(NV_HOPPER_USERMODE_A_PARAMS) == 2);

struct NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS {
  std::uint64_t offset, limit;
  std::uint32_t hVASpace, pad;
};
static_assert(sizeof(NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS) == 24);

struct NV_VASPACE_ALLOCATION_PARAMETERS {
  std::uint32_t index, flags;
  std::uint64_t vaSize, vaStartInternal, vaLimitInternal;
  std::uint32_t bigPageSize, pad0;
  std::uint64_t vaBase;
  std::uint32_t pasid, pad1;
};
static_assert(sizeof(NV_VASPACE_ALLOCATION_PARAMETERS) == 56 &&
              offsetof(NV_VASPACE_ALLOCATION_PARAMETERS, vaBase) == 40);

struct NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS {
  std::uint32_t hObjectError, hObjectEccError, hVASpace, engineType;
  std::uint8_t bIsCallingContextVgpuPlugin;
};
static_assert(sizeof(NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS) == 20);

struct NV_CTXSHARE_ALLOCATION_PARAMETERS {
  std::uint32_t hVASpace, flags, subctxId;
};
static_assert(sizeof(NV_CTXSHARE_ALLOCATION_PARAMETERS) == 12);

struct NV_MEMORY_DESC_PARAMS {
  std::uint64_t base, size;
  std::uint32_t addressSpace, cacheAttrib;
};
static_assert(sizeof(NV_MEMORY_DESC_PARAMS) == 24);

inline constexpr unsigned NV_MAX_SUBDEVICES = 8;
struct NV_CHANNEL_ALLOC_PARAMS {
  std::uint32_t hObjectError, hObjectBuffer;
  std::uint64_t gpFifoOffset;
  std::uint32_t gpFifoEntries, flags, hContextShare, hVASpace;
  std::uint32_t hUserdMemory[NV_MAX_SUBDEVICES];
  std::uint64_t userdOffset[NV_MAX_SUBDEVICES];
  std::uint32_t engineType, cid, subDeviceId, hObjectEccError;
  NV_MEMORY_DESC_PARAMS instanceMem, userdMem, ramfcMem, mthdbufMem;
  std::uint32_t hPhysChannelGroup, internalFlags;
  NV_MEMORY_DESC_PARAMS errorNotifierMem, eccErrorNotifierMem;
  std::uint32_t ProcessID, SubProcessID;
  std::uint32_t encryptIv[3], decryptIv[3], hmacNonce[8];
  std::uint32_t tpcConfigID, pad;
};
static_assert(sizeof(NV_CHANNEL_ALLOC_PARAMS) == 368);
static_assert(offsetof(NV_CHANNEL_ALLOC_PARAMS, gpFifoOffset) == 8);
static_assert(offsetof(NV_CHANNEL_ALLOC_PARAMS, gpFifoEntries) == 16);
static_assert(offsetof(NV_CHANNEL_ALLOC_PARAMS, hContextShare) == 24);
static_assert(offsetof(NV_CHANNEL_ALLOC_PARAMS, hUserdMemory) == 32);
static_assert(offsetof(NV_CHANNEL_ALLOC_PARAMS, userdOffset) == 64);
static_assert(offsetof(NV_CHANNEL_ALLOC_PARAMS, engineType) == 128);
static_assert(offsetof(NV_CHANNEL_ALLOC_PARAMS, tpcConfigID) == 360);

struct NV83DE_ALLOC_PARAMETERS {
  std::uint32_t hDebuggerClient_Obsolete, hAppClient, hClass3dObject;
};
static_assert(sizeof(NV83DE_ALLOC_PARAMETERS) == 12);

struct NV_MEMORY_ALLOCATION_PARAMS {
  std::uint32_t owner, type, flags, width, height;
  std::int32_t pitch;
  std::uint32_t attr, attr2, format, comprCovg, zcullCovg, pad0;
  std::uint64_t rangeLo, rangeHi, size, alignment, offset, limit, address;
  std::uint32_t ctagOffset, hVASpace, internalflags, tag;
  std::int32_t numaNode;
  std::uint32_t pad1;
};
static_assert(sizeof(NV_MEMORY_ALLOCATION_PARAMS) == 128);
static_assert(offsetof(NV_MEMORY_ALLOCATION_PARAMS, size) == 64);
static_assert(offsetof(NV_MEMORY_ALLOCATION_PARAMS, address) == 96);

struct NV0005_ALLOC_PARAMETERS {
  std::uint32_t hParentClient, hSrcResource, hClass, notifyIndex;
  std::uint64_t data;
};
static_assert(sizeof(NV0005_ALLOC_PARAMETERS) == 24);

// ---- Control parameters.
struct NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_PARAMS {
  std::uint32_t sizeOfStrings, pad;
  std::uint64_t pDriverVersionBuffer, pVersionBuffer, pTitleBuffer;
  std::uint32_t changelistNumber, officialChangelistNumber;
};
static_assert(sizeof(NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_PARAMS) == 40);

struct NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS {
  char driverVersionBuffer[256], versionBuffer[256], driverBranch[256], titleBuffer[256];
  std::uint32_t changelistNumber, officialChangelistNumber;
};
static_assert(sizeof(NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS) == 1032);

struct NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS {
  std::uint32_t gpuId, gpuFlags, deviceInstance, subDeviceInstance, sliStatus, boardId, gpuInstance;
  std::int32_t numaId;
};
static_assert(sizeof(NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS) == 32);

struct NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS {
  std::uint32_t numClasses, pad;
  std::uint64_t classList;
};
static_assert(sizeof(NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS) == 16);

struct NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS {
  std::uint32_t numClasses;
  std::uint32_t classList[NV0080_CTRL_GPU_CLASSLIST_MAX_SIZE];
};
static_assert(sizeof(NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS) == 804);

struct NV2080_CTRL_GPU_GET_GID_INFO_PARAMS {
  std::uint32_t index, flags, length;
  std::uint8_t data[NV2080_GPU_MAX_GID_LENGTH];
};
static_assert(sizeof(NV2080_CTRL_GPU_GET_GID_INFO_PARAMS) == 268);

struct NV2080_CTRL_EVENT_SET_NOTIFICATION_PARAMS {
  std::uint32_t event, action;
  std::uint8_t bNotifyState;
  std::uint32_t info32;
  std::uint16_t info16;
};
static_assert(sizeof(NV2080_CTRL_EVENT_SET_NOTIFICATION_PARAMS) == 20);

struct NV2080_CTRL_GR_INFO {
  std::uint32_t index, data;
};
struct NV2080_CTRL_GR_GET_INFO_PARAMS {
  std::uint32_t grInfoListSize, pad;
  std::uint64_t grInfoList;
  std::uint32_t routeFlags, pad1;  // NV2080_CTRL_GR_ROUTE_INFO
  std::uint64_t route;
};
static_assert(sizeof(NV2080_CTRL_GR_GET_INFO_PARAMS) == 32);

struct NV2080_CTRL_TIMER_GET_TIME_PARAMS {
  std::uint64_t time_nsec;
};
static_assert(sizeof(NV2080_CTRL_TIMER_GET_TIME_PARAMS) == 8);

struct NV2080_CTRL_PERF_BOOST_PARAMS {
  std::uint32_t flags, duration;
};
static_assert(sizeof(NV2080_CTRL_PERF_BOOST_PARAMS) == 8);

struct NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS {
  std::uint32_t workSubmitToken;
};
static_assert(sizeof(NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS) == 4);

struct NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS {
  std::uint8_t bEnable, bSkipSubmit, bSkipEnable;
};
static_assert(sizeof(NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS) == 3);

// ---- UVM parameters.
struct UVM_INITIALIZE_PARAMS {
  std::uint64_t flags;
  std::uint32_t rmStatus, pad;
};
static_assert(sizeof(UVM_INITIALIZE_PARAMS) == 16);

struct UVM_MM_INITIALIZE_PARAMS {
  std::int32_t uvmFd;
  std::uint32_t rmStatus;
};
static_assert(sizeof(UVM_MM_INITIALIZE_PARAMS) == 8);

struct UVM_REGISTER_GPU_PARAMS {
  std::uint8_t gpu_uuid[16];
  std::uint8_t numaEnabled;
  std::int32_t numaNodeId, rmCtrlFd;
  std::uint32_t hClient, hSmcPartRef, rmStatus;
};
static_assert(sizeof(UVM_REGISTER_GPU_PARAMS) == 40 && offsetof(UVM_REGISTER_GPU_PARAMS, rmCtrlFd) == 24);

struct UVM_REGISTER_GPU_VASPACE_PARAMS {
  std::uint8_t gpuUuid[16];
  std::int32_t rmCtrlFd;
  std::uint32_t hClient, hVaSpace, rmStatus;
};
static_assert(sizeof(UVM_REGISTER_GPU_VASPACE_PARAMS) == 32);

struct UVM_REGISTER_CHANNEL_PARAMS {
  std::uint8_t gpuUuid[16];
  std::int32_t rmCtrlFd;
  std::uint32_t hClient, hChannel, pad0;
  std::uint64_t base, length;
  std::uint32_t rmStatus, pad1;
};
static_assert(sizeof(UVM_REGISTER_CHANNEL_PARAMS) == 56 && offsetof(UVM_REGISTER_CHANNEL_PARAMS, base) == 32);

struct UVM_UNREGISTER_CHANNEL_PARAMS {
  std::uint8_t gpuUuid[16];
  std::uint32_t hClient, hChannel, rmStatus;
};
static_assert(sizeof(UVM_UNREGISTER_CHANNEL_PARAMS) == 28);

struct UVM_CREATE_EXTERNAL_RANGE_PARAMS {
  std::uint64_t base, length;
  std::uint32_t rmStatus, pad;
};
static_assert(sizeof(UVM_CREATE_EXTERNAL_RANGE_PARAMS) == 24);

struct UvmGpuMappingAttributes {
  std::uint8_t gpuUuid[16];
  std::uint32_t gpuMappingType, gpuCachingType, gpuFormatType, gpuElementBits, gpuCompressionType;
};
static_assert(sizeof(UvmGpuMappingAttributes) == 36);

struct UVM_MAP_EXTERNAL_ALLOCATION_PARAMS {
  std::uint64_t base, length, offset;
  UvmGpuMappingAttributes perGpuAttributes[UVM_MAX_GPUS];
  std::uint64_t gpuAttributesCount;
  std::int32_t rmCtrlFd;
  std::uint32_t hClient, hMemory, rmStatus;
};
static_assert(sizeof(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS) == 9264);
static_assert(offsetof(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, gpuAttributesCount) == 9240);
static_assert(offsetof(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS, rmCtrlFd) == 9248);

struct UVM_FREE_PARAMS {
  std::uint64_t base, length;
  std::uint32_t rmStatus, pad;
};
static_assert(sizeof(UVM_FREE_PARAMS) == 24);

// UvmGpuMappingType (uvm_types.h): Default 0, ReadWriteAtomic 1, ReadWrite 2, ReadOnly 3.
inline constexpr std::uint32_t UvmGpuMappingTypeReadOnly = 3;
inline constexpr std::uint32_t kUvmGpuMappingTypeCount = 4;
// UvmGpuCachingType: Default 0, ForceUncached 1, ForceCached 2.
inline constexpr std::uint32_t kUvmGpuCachingTypeCount = 3;

// The request number of escape `nr` with a parameter struct of `size` bytes: _IOWR('F', nr, size).
constexpr unsigned long escape(unsigned nr, std::size_t size) {
  return (3ul << 30) | (static_cast<unsigned long>(size) << 16) | (kIoctlMagic << 8) | nr;
}

}  // namespace rig::sim::nv::abi
