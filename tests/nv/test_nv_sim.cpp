// The NVIDIA simulator (tests/sim/nv/sim.hpp) driven as a driver drives the kernel: raw
// ioctls through the seam, with this file's own definitions of the structs it sends (from
// the facts' sizes and offsets, /work/shared/facts/nv-hopper.md), so a layout the simulator
// got wrong shows here. Each test is named after the promise it checks.
#include <doctest/doctest.h>

#include <code.hpp>
#include <sim.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>

namespace {

namespace nvsim = rig::sim::nv;

// ---- Status codes (OGKM nvstatuscodes.h).
constexpr std::uint32_t OK = 0, GPU_UUID_NOT_FOUND = 0x12, ILLEGAL_ACTION = 0x16, IN_USE = 0x17,
                        INSERT_DUPLICATE_NAME = 0x19, INSUFFICIENT_RESOURCES = 0x1A, INVALID_ADDRESS = 0x1E,
                        INVALID_ARGUMENT = 0x1F, INVALID_CHANNEL = 0x21, INVALID_CLASS = 0x22, INVALID_CLIENT = 0x23,
                        INVALID_DEVICE = 0x26, INVALID_FLAGS = 0x29, INVALID_LIMIT = 0x2E,
                        INVALID_OBJECT = 0x31, INVALID_OBJECT_HANDLE = 0x33, INVALID_OBJECT_PARENT = 0x36, INVALID_OFFSET = 0x37,
                        INVALID_PARAM_STRUCT = 0x3A, INVALID_STATE = 0x40, NO_MEMORY = 0x51, NOT_SUPPORTED = 0x56,
                        OBJECT_NOT_FOUND = 0x57, STATE_IN_USE = 0x63, UVM_ADDRESS_IN_USE = 0x68, GENERIC = 0xFFFF;

constexpr unsigned long esc(unsigned nr, std::size_t size) {
  return (3ul << 30) | (static_cast<unsigned long>(size) << 16) | ('F' << 8) | nr;
}

// ---- The structs this driver sends (its own, sized and laid out as the facts say).
struct Alloc21 {
  std::uint32_t hRoot, hParent, hNew, hClass;
  std::uint64_t params;
  std::uint32_t paramsSize, status;
};
struct Alloc64 {
  std::uint32_t hRoot, hParent, hNew, hClass;
  std::uint64_t params, rights;
  std::uint32_t paramsSize, flags, status, pad;
};
struct Free00 {
  std::uint32_t hRoot, hParent, hOld, status;
};
struct Control54 {
  std::uint32_t hClient, hObject, cmd, flags;
  std::uint64_t params;
  std::uint32_t paramsSize, status;
};
struct Map33 {
  std::uint32_t hClient, hDevice, hMemory, pad;
  std::uint64_t offset, length, linear;
  std::uint32_t status, flags;
  std::int32_t fd;
  std::uint32_t pad2;
};
struct Unmap34 {
  std::uint32_t hClient, hDevice, hMemory, pad;
  std::uint64_t linear;
  std::uint32_t status, flags;
};
struct AllocMem02 {
  std::uint32_t hRoot, hParent, hNew, hClass, flags, pad;
  std::uint64_t pMemory, limit;
  std::uint32_t status, pad1;
  std::int32_t fd;
  std::uint32_t pad2;
};
struct OsEvent {
  std::uint32_t hClient, hDevice, fd, status;
};
struct EventData41 {
  std::uint64_t pEvent;
  std::uint32_t more, status;
};
struct Version {
  std::uint32_t cmd, reply;
  char text[64];
};
struct Xfer {
  std::uint32_t cmd, size;
  std::uint64_t ptr;
};
static_assert(sizeof(Alloc21) == 32 && sizeof(Alloc64) == 48 && sizeof(Free00) == 16 && sizeof(Control54) == 32);
static_assert(sizeof(Map33) == 56 && sizeof(Unmap34) == 32 && sizeof(AllocMem02) == 56 && sizeof(OsEvent) == 16);
static_assert(sizeof(Version) == 72 && sizeof(Xfer) == 16 && sizeof(EventData41) == 16);
struct DmabufExport {  // nv_ioctl_export_to_dma_buf_fd_t, 2608 B: 128 handles at 36, offsets at 552
  std::int32_t fd;
  std::uint32_t hClient, totalObjects, numObjects, index, pad;
  std::uint64_t totalSize;
  std::uint8_t mappingType, bAllowMmap, pad1[2];
  std::uint32_t handles[128];
  std::uint64_t offsets[128], sizes[128];
  std::uint32_t status, pad2;
};
static_assert(sizeof(DmabufExport) == 2608 && offsetof(DmabufExport, offsets) == 552 &&
              offsetof(DmabufExport, status) == 2600);

struct DeviceParams {  // NV0080_ALLOC_PARAMETERS, 56 B
  std::uint32_t deviceId, hClientShare, hTargetClient, hTargetDevice, flags, pad;
  std::uint64_t vaSpaceSize, vaStartInternal, vaLimitInternal;
  std::uint32_t vaMode, pad1;
};
struct VaSpaceParams {  // NV_VASPACE_ALLOCATION_PARAMETERS, 56 B
  std::uint32_t index, flags;
  std::uint64_t vaSize, vaStartInternal, vaLimitInternal;
  std::uint32_t bigPageSize, pad;
  std::uint64_t vaBase;
  std::uint32_t pasid, pad1;
};
struct MemoryParams {  // NV_MEMORY_ALLOCATION_PARAMS, 128 B: size at 64
  std::uint32_t owner, type, flags, width, height, pitch, attr, attr2, format, comprCovg, zcullCovg, pad;
  std::uint64_t rangeLo, rangeHi, size, alignment, offset, limit, address;
  std::uint32_t ctagOffset, hVASpace, internalflags, tag, numaNode, pad1;
};
struct GroupParams {  // NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS, 20 B
  std::uint32_t hError, hEccError, hVASpace, engineType;
  std::uint8_t vgpu;
};
struct ShareParams {  // NV_CTXSHARE_ALLOCATION_PARAMETERS, 12 B
  std::uint32_t hVASpace, flags, subctxId;
};
struct ChannelParams {  // NV_CHANNEL_ALLOC_PARAMS, 368 B: the facts' offsets
  std::uint32_t hObjectError, hObjectBuffer;
  std::uint64_t gpFifoOffset;
  std::uint32_t gpFifoEntries, flags, hContextShare, hVASpace;
  std::uint32_t hUserdMemory[8];
  std::uint64_t userdOffset[8];
  std::uint32_t engineType;
  std::uint8_t rest[368 - 132];
};
struct EventParams {  // NV0005_ALLOC_PARAMETERS, 24 B
  std::uint32_t hParentClient, hSrcResource, hClass, notifyIndex;
  std::uint64_t data;
};
struct VirtualParams {  // NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS, 24 B
  std::uint64_t offset, limit;
  std::uint32_t hVASpace, pad;
};
struct DebuggerParams {  // NV83DE_ALLOC_PARAMETERS, 12 B
  std::uint32_t obsolete, hAppClient, hClass3dObject;
};
static_assert(sizeof(DeviceParams) == 56 && sizeof(VaSpaceParams) == 56 && sizeof(MemoryParams) == 128);
static_assert(sizeof(GroupParams) == 20 && sizeof(ShareParams) == 12 && sizeof(ChannelParams) == 368);
static_assert(offsetof(ChannelParams, userdOffset) == 64 && offsetof(ChannelParams, engineType) == 128);
static_assert(sizeof(EventParams) == 24 && sizeof(VirtualParams) == 24 && sizeof(DebuggerParams) == 12);

struct GidParams {  // NV2080_CTRL_GPU_GET_GID_INFO_PARAMS, 268 B
  std::uint32_t index, flags, length;
  std::uint8_t data[256];
};
struct ClassList2 {  // NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS
  std::uint32_t count;
  std::uint32_t list[200];
};
struct ClassList {  // NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS, 16 B
  std::uint32_t count, pad;
  std::uint64_t list;
};
struct BuildVersion {  // NV0000 GET_BUILD_VERSION (legacy), 40 B
  std::uint32_t sizeOfStrings, pad;
  std::uint64_t driver, version, title;
  std::uint32_t cl, officialCl;
};
struct BuildVersion2 {  // V2, 1032 B
  char driver[256], version[256], branch[256], title[256];
  std::uint32_t cl, officialCl;
};
struct IdInfo2 {  // 32 B
  std::uint32_t gpuId, gpuFlags, deviceInstance, subDeviceInstance, sliStatus, boardId, gpuInstance;
  std::int32_t numaId;
};
struct Notification {  // NV2080_CTRL_EVENT_SET_NOTIFICATION_PARAMS, 20 B
  std::uint32_t event, action;
  std::uint8_t notifyState;
  std::uint32_t info32;
  std::uint16_t info16;
};
struct GrInfoParams {  // NV2080_CTRL_GR_GET_INFO_PARAMS, 32 B
  std::uint32_t count, pad;
  std::uint64_t list;
  std::uint32_t routeFlags, pad1;
  std::uint64_t route;
};
struct CardInfo {
  std::uint8_t bytes[72];
};
static_assert(sizeof(GidParams) == 268 && sizeof(ClassList2) == 804 && sizeof(BuildVersion) == 40);
static_assert(sizeof(BuildVersion2) == 1032 && sizeof(IdInfo2) == 32 && sizeof(Notification) == 20);
static_assert(sizeof(GrInfoParams) == 32);

struct UvmInit {
  std::uint64_t flags;
  std::uint32_t status, pad;
};
struct UvmMmInit {
  std::int32_t fd;
  std::uint32_t status;
};
struct UvmRegisterGpu {  // 40 B
  std::uint8_t uuid[16];
  std::uint8_t numa;
  std::int32_t numaNode, rmCtrlFd;
  std::uint32_t hClient, hSmcPartRef, status;
};
struct UvmRegisterVaSpace {  // 32 B
  std::uint8_t uuid[16];
  std::int32_t rmCtrlFd;
  std::uint32_t hClient, hVaSpace, status;
};
struct UvmUnregisterChannel {  // 28 B
  std::uint8_t uuid[16];
  std::uint32_t hClient, hChannel, status;
};
struct UvmRegisterChannel {  // 56 B
  std::uint8_t uuid[16];
  std::int32_t rmCtrlFd;
  std::uint32_t hClient, hChannel, pad;
  std::uint64_t base, length;
  std::uint32_t status, pad1;
};
struct UvmRange {  // CREATE_EXTERNAL_RANGE and FREE, 24 B
  std::uint64_t base, length;
  std::uint32_t status, pad;
};
struct UvmMapExternal {  // 9264 B
  std::uint64_t base, length, offset;
  struct {
    std::uint8_t uuid[16];
    std::uint32_t mapping, caching, format, elementBits, compression;
  } gpus[256];
  std::uint64_t count;
  std::int32_t rmCtrlFd;
  std::uint32_t hClient, hMemory, status;
};
static_assert(sizeof(UvmRegisterGpu) == 40 && sizeof(UvmRegisterVaSpace) == 32 && sizeof(UvmRegisterChannel) == 56);
static_assert(sizeof(UvmRange) == 24 && sizeof(UvmMapExternal) == 9264);

// Classes and numbers.
constexpr std::uint32_t ROOT = 0x41, DEVICE = 0x80, SUBDEVICE = 0x2080, SYSMEM = 0x3E, VIDMEM = 0x40,
                        VIRTUAL = 0x70, OS_DESCRIPTOR = 0x71, OS_EVENT = 0x79, DEBUGGER = 0x83DE,
                        CONTEXT_SHARE = 0x9067, VASPACE = 0x90F1, GROUP = 0xA06C;
constexpr std::uint32_t HOPPER_CHANNEL = 0xC86F, HOPPER_COMPUTE = 0xCBC0, HOPPER_COPY = 0xC8B5,
                        HOPPER_USERMODE = 0xC661, AMPERE_COMPUTE = 0xC6C0;
constexpr unsigned ESC_ALLOC_MEMORY = 0x27, ESC_FREE = 0x29, ESC_CONTROL = 0x2A, ESC_ALLOC = 0x2B, ESC_MAP = 0x4E,
                   ESC_UNMAP = 0x4F, ESC_EVENT_DATA = 0x52, ESC_MAP_DMA = 0x57, ESC_CARD_INFO = 200,
                   ESC_REGISTER_FD = 201, ESC_ALLOC_OS_EVENT = 206, ESC_FREE_OS_EVENT = 207, ESC_VERSION = 210,
                   ESC_XFER = 211, ESC_ATTACH = 212, ESC_EXPORT_DMABUF = 217;
constexpr std::uint32_t CTRL_BUILD_VERSION = 0x101, CTRL_BUILD_VERSION_V2 = 0x13E, CTRL_ID_INFO_V2 = 0x205,
                        CTRL_CLASSLIST = 0x800201, CTRL_CLASSLIST_V2 = 0x800292, CTRL_GID = 0x2080014A,
                        CTRL_SET_NOTIFICATION = 0x20800301, CTRL_TIMER = 0x20800403, CTRL_GR_INFO = 0x20801201,
                        CTRL_PERF_BOOST = 0x2080200A, CTRL_TOKEN = 0xC36F0108, CTRL_SCHEDULE = 0xA06C0101;
constexpr unsigned long UVM_INITIALIZE = 0x30000001, UVM_REGISTER_GPU_VASPACE = 25, UVM_REGISTER_CHANNEL = 27,
                        UVM_UNREGISTER_CHANNEL = 28,
                        UVM_MAP_EXTERNAL = 33, UVM_FREE = 34, UVM_REGISTER_GPU = 37, UVM_CREATE_RANGE = 73,
                        UVM_MM_INITIALIZE = 75;
constexpr std::uint32_t VA_EXTERNALLY_OWNED = 1u << 3, VA_PAGE_FAULTING = 1u << 6;
constexpr std::uint32_t NONSTALL = 0x08000000, GR0 = 12, RC_ERROR = 37;
constexpr std::uint64_t kVaBase = 0x1000, kVaSize = 0x1fffffb000000;

template <class T>
std::uint64_t ptr(T* p) {
  return reinterpret_cast<std::uint64_t>(p);
}

// The driver this file plays: the files, the RM calls and the objects of one bring-up.
struct Driver {
  nvsim::Simulator& sim;
  int ctl = -1, uvm = -1, uvm_mm = -1, dev = -1;
  std::uint32_t root = 0, device = 0, subdevice = 0, usermode = 0, vaspace = 0, group = 0, share = 0;
  std::uint32_t compute_channel = 0, copy_channel = 0, ring = 0, notifier = 0;
  std::byte* usermode_page = nullptr;
  std::byte* ring_cpu = nullptr;
  std::uint8_t uuid[16]{};

  explicit Driver(nvsim::Simulator& s) : sim(s) {}

  // RM_ALLOC with NVOS21 (or NVOS64); returns the status, the new handle in `h`.
  std::uint32_t alloc(std::uint32_t parent, std::uint32_t klass, void* params, std::size_t size, std::uint32_t& h,
                      bool nvos64 = false) {
    if (nvos64) {
      Alloc64 a{root, parent, h, klass, ptr(params), 0, std::uint32_t(size), 0, ~0u, 0};
      REQUIRE(sim.ioctl(ctl, esc(ESC_ALLOC, sizeof a), &a) == 0);
      if (a.status == OK) h = a.hNew;
      return a.status;
    }
    Alloc21 a{root, parent, h, klass, ptr(params), std::uint32_t(size), ~0u};
    REQUIRE(sim.ioctl(ctl, esc(ESC_ALLOC, sizeof a), &a) == 0);
    if (a.status == OK) h = a.hNew;
    return a.status;
  }
  template <class P>
  std::uint32_t alloc(std::uint32_t parent, std::uint32_t klass, P& params, std::uint32_t& h) {
    return alloc(parent, klass, &params, sizeof params, h);
  }
  std::uint32_t alloc_bare(std::uint32_t parent, std::uint32_t klass, std::uint32_t& h) {
    return alloc(parent, klass, nullptr, 0, h);
  }
  std::uint32_t control(std::uint32_t object, std::uint32_t cmd, void* params, std::size_t size) {
    Control54 c{root, object, cmd, 0, ptr(params), std::uint32_t(size), ~0u};
    REQUIRE(sim.ioctl(ctl, esc(ESC_CONTROL, sizeof c), &c) == 0);
    return c.status;
  }
  template <class P>
  std::uint32_t control(std::uint32_t object, std::uint32_t cmd, P& params) {
    return control(object, cmd, &params, sizeof params);
  }
  std::uint32_t free(std::uint32_t h) {
    Free00 f{root, 0, h, ~0u};
    REQUIRE(sim.ioctl(ctl, esc(ESC_FREE, sizeof f), &f) == 0);
    return f.status;
  }
  // Memory of `klass` (video or system) of `size` bytes.
  std::uint32_t memory(std::uint32_t klass, std::uint64_t size, std::uint32_t& h) {
    MemoryParams m{};
    m.owner = root, m.flags = 0x8000 | 0x4000 | 1, m.size = size;
    return alloc(device, klass, m, h);
  }
  // RM_MAP_MEMORY through a fresh /dev/nvidia0 file, then mmap of it: the CPU's view.
  std::byte* map_cpu(std::uint32_t parent, std::uint32_t memory, std::uint64_t size, int* file = nullptr,
                     std::uint64_t* linear = nullptr) {
    const int fd = sim.open("/dev/nvidia0", O_RDWR);
    REQUIRE(fd >= 0);
    std::int32_t ctl_fd = ctl;
    REQUIRE(sim.ioctl(fd, esc(ESC_REGISTER_FD, 4), &ctl_fd) == 0);
    Map33 m{root, parent, memory, 0, 0, size, 0, ~0u, 0, fd, 0};
    REQUIRE(sim.ioctl(ctl, esc(ESC_MAP, sizeof m), &m) == 0);
    REQUIRE(m.status == OK);
    auto v = sim.mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(v.has_value());
    if (file) *file = fd;
    if (linear) *linear = m.linear;
    return static_cast<std::byte*>(*v);
  }
  std::uint32_t uvm_range(std::uint64_t base, std::uint64_t length) {
    UvmRange r{base, length, ~0u, 0};
    REQUIRE(sim.ioctl(uvm, UVM_CREATE_RANGE, &r) == 0);
    return r.status;
  }
  std::uint32_t uvm_map(std::uint64_t va, std::uint32_t memory, std::uint64_t length, std::uint64_t offset = 0,
                        std::uint32_t mapping_type = 0) {
    auto m = std::make_unique<UvmMapExternal>();
    std::memset(m.get(), 0, sizeof *m);
    m->base = va, m->length = length, m->offset = offset;
    std::memcpy(m->gpus[0].uuid, uuid, 16);
    m->gpus[0].mapping = mapping_type;
    m->count = 1, m->rmCtrlFd = ctl, m->hClient = root, m->hMemory = memory, m->status = ~0u;
    REQUIRE(sim.ioctl(uvm, UVM_MAP_EXTERNAL, m.get()) == 0);
    return m->status;
  }
  std::uint32_t uvm_free(std::uint64_t base, std::uint64_t length) {
    UvmRange r{base, length, ~0u, 0};
    REQUIRE(sim.ioctl(uvm, UVM_FREE, &r) == 0);
    return r.status;
  }

  // The facts' bring-up up to a VA space registered in UVM.
  void open_device() {
    ctl = sim.open("/dev/nvidiactl", O_RDWR);
    uvm = sim.open("/dev/nvidia-uvm", O_RDWR);
    uvm_mm = sim.open("/dev/nvidia-uvm", O_RDWR);
    REQUIRE((ctl >= 0 && uvm >= 0 && uvm_mm >= 0));
    REQUIRE(alloc_bare(0, ROOT, root) == OK);
    REQUIRE(root != 0);
    UvmInit init{0, ~0u, 0};
    REQUIRE(sim.ioctl(uvm, UVM_INITIALIZE, &init) == 0);
    REQUIRE(init.status == OK);
    UvmMmInit mm{uvm, ~0u};
    REQUIRE(sim.ioctl(uvm_mm, UVM_MM_INITIALIZE, &mm) == 0);
    REQUIRE(mm.status == OK);
    CardInfo cards[4]{};
    REQUIRE(sim.ioctl(ctl, esc(ESC_CARD_INFO, sizeof cards), cards) == 0);
    REQUIRE(cards[0].bytes[0] == 1);  // valid
    std::uint32_t gpu_id;
    std::memcpy(&gpu_id, cards[0].bytes + 16, 4);
    IdInfo2 id{};
    id.gpuId = gpu_id;
    REQUIRE(control(root, CTRL_ID_INFO_V2, id) == OK);
    dev = sim.open("/dev/nvidia0", O_RDWR);
    std::int32_t ctl_fd = ctl;
    REQUIRE(sim.ioctl(dev, esc(ESC_REGISTER_FD, 4), &ctl_fd) == 0);
    DeviceParams d{};
    d.hClientShare = root;
    REQUIRE(alloc(root, DEVICE, d, device) == OK);
    std::uint32_t sub_id = 0;
    REQUIRE(alloc(device, SUBDEVICE, &sub_id, 4, subdevice) == OK);
    REQUIRE(alloc_bare(subdevice, HOPPER_USERMODE, usermode) == OK);
    usermode_page = map_cpu(subdevice, usermode, 0x10000);
    VaSpaceParams va{};
    va.flags = VA_PAGE_FAULTING | VA_EXTERNALLY_OWNED, va.vaBase = kVaBase, va.vaSize = kVaSize;
    REQUIRE(alloc(device, VASPACE, va, vaspace) == OK);
    GidParams gid{};
    gid.flags = 2;  // binary
    REQUIRE(control(subdevice, CTRL_GID, gid) == OK);
    REQUIRE(gid.length == 16);
    std::memcpy(uuid, gid.data, 16);
    UvmRegisterGpu rg{};
    std::memcpy(rg.uuid, uuid, 16);
    rg.rmCtrlFd = -1, rg.status = ~0u;
    REQUIRE(sim.ioctl(uvm, UVM_REGISTER_GPU, &rg) == 0);
    REQUIRE(rg.status == OK);
    UvmRegisterVaSpace rv{};
    std::memcpy(rv.uuid, uuid, 16);
    rv.rmCtrlFd = ctl, rv.hClient = root, rv.hVaSpace = vaspace, rv.status = ~0u;
    REQUIRE(sim.ioctl(uvm, UVM_REGISTER_GPU_VASPACE, &rv) == 0);
    REQUIRE(rv.status == OK);
  }

  // A channel group, a context share, the ring and USERD in one vidmem buffer mapped for the
  // CPU and in the GPU VA space, and a compute and a copy channel with their engine objects.
  static constexpr std::uint64_t kRingVa = 0x200000000, kRingBytes = 3 << 20;
  void channels() {
    GroupParams g{};
    g.engineType = 1;
    REQUIRE(alloc(device, GROUP, g, group) == OK);
    REQUIRE(memory(VIDMEM, kRingBytes, ring) == OK);
    ring_cpu = map_cpu(device, ring, kRingBytes);
    REQUIRE(uvm_range(kRingVa, kRingBytes) == OK);
    REQUIRE(uvm_map(kRingVa, ring, kRingBytes) == OK);
    REQUIRE(memory(SYSMEM, 4096, notifier) == OK);
    ShareParams s{vaspace, 1, 0};
    REQUIRE(alloc(group, CONTEXT_SHARE, s, share) == OK);
    for (int i = 0; i < 2; ++i) {
      ChannelParams c{};
      c.hObjectError = notifier;
      c.gpFifoOffset = kRingVa + std::uint64_t(i) * 0x10000;
      c.gpFifoEntries = 1024;
      c.hContextShare = share;
      c.hUserdMemory[0] = ring;
      c.userdOffset[0] = 0x200000 + std::uint64_t(i) * 0x1000;
      c.engineType = i == 0 ? 1 : 9;  // GRAPHICS, COPY0
      std::uint32_t& h = i == 0 ? compute_channel : copy_channel;
      REQUIRE(alloc(group, HOPPER_CHANNEL, c, h) == OK);
    }
    std::uint32_t engine = 0;
    REQUIRE(alloc_bare(compute_channel, HOPPER_COMPUTE, engine) == OK);
    engine = 0;
    REQUIRE(alloc_bare(copy_channel, HOPPER_COPY, engine) == OK);
  }
};

}  // namespace

TEST_CASE("the facts' bring-up succeeds and every object it makes is counted") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  // Legacy build version, as gVisor allows, and V2.
  char a[64]{}, b[64]{}, c[64]{};
  BuildVersion bv{64, 0, ptr(a), ptr(b), ptr(c), 0, 0};
  CHECK(d.control(d.root, CTRL_BUILD_VERSION, bv) == OK);
  CHECK(std::string(a) == "580.142");
  BuildVersion2 bv2{};
  CHECK(d.control(d.root, CTRL_BUILD_VERSION_V2, bv2) == OK);
  CHECK(std::string(bv2.driver) == "580.142");
  Version v{'2', 0, {}};
  CHECK(sim.ioctl(d.ctl, esc(ESC_VERSION, sizeof v), &v) == 0);
  CHECK(v.reply == 1);
  CHECK(std::string(v.text) == "580.142");
  // NV01_MEMORY_VIRTUAL, as outside gVisor.
  VirtualParams vp{0, 0x1ffffffffffff, 0, 0};
  std::uint32_t virt = 0;
  CHECK(d.alloc(d.device, VIRTUAL, vp, virt) == OK);
  // The class list, both ways.
  ClassList cl{0, 0, 0};
  CHECK(d.control(d.device, CTRL_CLASSLIST, cl) == OK);
  std::vector<std::uint32_t> list(cl.count);
  cl.list = ptr(list.data());
  CHECK(d.control(d.device, CTRL_CLASSLIST, cl) == OK);
  CHECK(std::ranges::count(list, HOPPER_COMPUTE) == 1);
  CHECK(std::ranges::count(list, AMPERE_COMPUTE) == 0);
  ClassList2 cl2{};
  CHECK(d.control(d.device, CTRL_CLASSLIST_V2, cl2) == OK);
  CHECK(cl2.count == list.size());
  d.channels();
  DebuggerParams dbg{0, d.root, d.compute_channel};
  std::uint32_t debugger = 0;
  CHECK(d.alloc(d.device, DEBUGGER, dbg, debugger) == OK);
  std::uint32_t token = 0;
  CHECK(d.control(d.compute_channel, CTRL_TOKEN, token) == OK);
  CHECK(token != 0);
  UvmRegisterChannel rc{};
  std::memcpy(rc.uuid, d.uuid, 16);
  rc.rmCtrlFd = d.ctl, rc.hClient = d.root, rc.hChannel = d.compute_channel, rc.base = 0x300000000,
  rc.length = 0x10000, rc.status = ~0u;
  CHECK(sim.ioctl(d.uvm, UVM_REGISTER_CHANNEL, &rc) == 0);
  CHECK(rc.status == OK);
  std::uint8_t enable[3] = {1, 0, 0};
  CHECK(d.control(d.group, CTRL_SCHEDULE, enable, 3) == OK);
  std::uint64_t t0 = 0, t1 = 0;
  CHECK(d.control(d.subdevice, CTRL_TIMER, t0) == OK);
  CHECK(d.control(d.subdevice, CTRL_TIMER, t1) == OK);
  CHECK(t1 >= t0);
  std::uint32_t boost[2] = {0, 0};
  CHECK(d.control(d.subdevice, CTRL_PERF_BOOST, boost, 8) == OK);
  struct { std::uint32_t index, data; } info[1] = {{0x0C, 0}};
  GrInfoParams gi{1, 0, ptr(info), 0, 0, 0};
  CHECK(d.control(d.subdevice, CTRL_GR_INFO, gi) == OK);
  CHECK(info[0].data == 0x900);  // SM 9.0
  // client, device, subdevice, usermode, VA space, virtual, group, ring, notifier, share,
  // 2 channels, 2 engine objects, debugger.
  CHECK(sim.live_objects() == 15);
  CHECK(sim.live_cpu_mappings() == 2);
  CHECK(sim.live_uvm_ranges() == 2);  // the ring's external range and the channel's
  CHECK(sim.live_uvm_maps() == 1);
  CHECK(sim.errors().empty());
}

TEST_CASE("video memory mapped for the CPU and in the GPU VA space shows the same bytes") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  std::uint32_t mem = 0;
  REQUIRE(d.memory(VIDMEM, 1 << 20, mem) == OK);
  std::byte* cpu = d.map_cpu(d.device, mem, 1 << 20);
  const std::uint64_t va = 0x400000000;
  REQUIRE(d.uvm_range(va, 2 << 20) == OK);
  REQUIRE(d.uvm_map(va, mem, 1 << 20) == OK);
  for (std::uint32_t i = 0; i < 256; ++i) std::memcpy(cpu + 4096 + 4 * i, &i, 4);
  const std::uint32_t marker = 1024;
  std::memcpy(cpu + 8192, &marker, 4);
  std::uint32_t seen[256]{};
  REQUIRE(sim.read_gpu(d.root, d.vaspace, va + 4096, seen, sizeof seen));
  for (std::uint32_t i = 0; i < 256; ++i) CHECK(seen[i] == i);
  // Past the mapping inside the range there is nothing.
  std::uint32_t x;
  CHECK_FALSE(sim.read_gpu(d.root, d.vaspace, va + (1 << 20), &x, 4));
  // System memory and the caller's own pages (an OS descriptor) map the same way.
  std::uint32_t sys = 0;
  REQUIRE(d.memory(SYSMEM, 8192, sys) == OK);
  std::byte* sys_cpu = d.map_cpu(d.device, sys, 8192);
  std::memcpy(sys_cpu + 8, "sysmem", 7);
  REQUIRE(d.uvm_map(va + (1 << 20), sys, 8192) == OK);
  char text[8]{};
  REQUIRE(sim.read_gpu(d.root, d.vaspace, va + (1 << 20) + 8, text, 7));
  CHECK(std::string(text) == "sysmem");
  void* host = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(host != MAP_FAILED);
  std::memcpy(static_cast<char*>(host) + 4096, "host!", 6);
  AllocMem02 os{d.root, d.device, 0, OS_DESCRIPTOR, (1u << 4) | (1u << 12) | (1u << 30), 0, ptr(host), 8191,
                ~0u, 0, d.dev, 0};
  REQUIRE(sim.ioctl(d.dev, esc(ESC_ALLOC_MEMORY, sizeof os), &os) == 0);
  REQUIRE(os.status == OK);
  REQUIRE(d.uvm_map(va + (1 << 20) + 8192, os.hNew, 8192) == OK);
  REQUIRE(sim.read_gpu(d.root, d.vaspace, va + (1 << 20) + 8192 + 4096, text, 6));
  CHECK(std::string(text) == "host!");
  // A mapping over part of another replaces that part only.
  REQUIRE(d.uvm_map(va + 4096, sys, 4096) == OK);
  std::uint32_t w = 1;
  REQUIRE(sim.read_gpu(d.root, d.vaspace, va, &w, 4));
  CHECK(w == 0);  // the video memory's first word, i = 0 at 4096 lies past it
  REQUIRE(sim.read_gpu(d.root, d.vaspace, va + 4096 + 8, text, 7));
  CHECK(std::string(text) == "sysmem");  // the system memory's bytes now
  // One read may not straddle two mappings (Space::map gives one).
  CHECK_FALSE(sim.read_gpu(d.root, d.vaspace, va + 8188, &w, 8));
  REQUIRE(sim.read_gpu(d.root, d.vaspace, va + 8192, &w, 4));
  CHECK(w == 1024);  // the video memory's again, at its own offset 8192
  ::munmap(host, 8192);
}

// One whole memory object as the one piece of a new dma-buf.
DmabufExport whole_export(const Driver& d, std::uint32_t memory, std::uint64_t bytes) {
  DmabufExport x{};
  x.fd = -1, x.hClient = d.root, x.totalObjects = 1, x.numObjects = 1, x.index = 0, x.totalSize = bytes;
  x.handles[0] = memory, x.offsets[0] = 0, x.sizes[0] = bytes, x.status = ~0u;
  return x;
}

TEST_CASE("EXPORT_TO_DMABUF_FD on the GPU's file gives a close-on-exec dma-buf of video memory's own pages, "
          "which outlives the memory") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  constexpr std::uint64_t kBytes = 64 << 10;
  std::uint32_t mem = 0;
  REQUIRE(d.memory(VIDMEM, kBytes, mem) == OK);
  std::byte* cpu = d.map_cpu(d.device, mem, kBytes);
  for (std::uint64_t i = 0; i < kBytes; ++i) cpu[i] = std::byte(i * 7);
  DmabufExport x = whole_export(d, mem, kBytes);
  CHECK(sim.ioctl(d.ctl, esc(ESC_EXPORT_DMABUF, sizeof x), &x) == -EINVAL);  // not on the control file
  CHECK(x.fd == -1);
  REQUIRE(sim.ioctl(d.dev, esc(ESC_EXPORT_DMABUF, sizeof x), &x) == 0);
  REQUIRE(x.status == OK);
  REQUIRE(x.fd >= 0);
  CHECK(sim.dmabuf_exports() == 1);
  CHECK((::fcntl(x.fd, F_GETFD) & FD_CLOEXEC) != 0);
  auto* seen = static_cast<std::byte*>(::mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, x.fd, 0));
  REQUIRE(seen != MAP_FAILED);
  CHECK(std::memcmp(seen, cpu, kBytes) == 0);
  cpu[kBytes - 1] = std::byte{0x5a};  // the same pages, not a copy
  CHECK(seen[kBytes - 1] == std::byte{0x5a});
  REQUIRE(d.free(mem) == OK);
  CHECK(seen[4096] == std::byte(4096 * 7 & 0xff));  // the dma-buf keeps them
  ::munmap(seen, kBytes);
  ::close(x.fd);
}

TEST_CASE("EXPORT_TO_DMABUF_FD refuses what the module refuses, with its status, and makes nothing") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  constexpr std::uint64_t kBytes = 64 << 10;
  std::uint32_t mem = 0, sys = 0;
  REQUIRE(d.memory(VIDMEM, kBytes, mem) == OK);
  REQUIRE(d.memory(SYSMEM, kBytes, sys) == OK);
  auto status = [&](DmabufExport x) {
    const std::int32_t given = x.fd;
    REQUIRE(sim.ioctl(d.dev, esc(ESC_EXPORT_DMABUF, sizeof x), &x) == 0);
    CHECK(x.fd == given);  // no descriptor made
    return x.status;
  };
  const DmabufExport good = whole_export(d, mem, kBytes);
  DmabufExport x = good;
  x.numObjects = 0;
  CHECK(status(x) == INVALID_ARGUMENT);
  x = good, x.totalSize = 0;
  CHECK(status(x) == INVALID_ARGUMENT);
  x = good, x.totalObjects = x.numObjects = 129;  // past NV_DMABUF_EXPORT_MAX_HANDLES
  CHECK(status(x) == INVALID_ARGUMENT);
  x = good, x.numObjects = 2;  // more than the dma-buf's objects
  CHECK(status(x) == INVALID_ARGUMENT);
  x = good, x.mappingType = 2;
  CHECK(status(x) == INVALID_ARGUMENT);
  x = good, x.mappingType = 1;  // FORCE_PCIE: only on CPU-coherent systems
  CHECK(status(x) == NOT_SUPPORTED);
  x = good, x.fd = -2;
  CHECK(status(x) == INVALID_ARGUMENT);
  x = good, x.totalObjects = 2, x.index = 2;  // objects past the dma-buf's
  CHECK(status(x) == INVALID_ARGUMENT);
  x = good, x.hClient = d.root + 0x100;
  CHECK(status(x) == INVALID_CLIENT);
  x = good, x.handles[0] = 0xdead;
  CHECK(status(x) == OBJECT_NOT_FOUND);
  x = good, x.handles[0] = d.subdevice;  // no memory
  CHECK(status(x) == INVALID_OBJECT);
  x = good, x.offsets[0] = 512, x.sizes[0] = kBytes - 4096, x.totalSize = kBytes - 4096;
  CHECK(status(x) == INVALID_ARGUMENT);  // an offset inside a page
  x = good, x.sizes[0] = x.totalSize = kBytes - 100;
  CHECK(status(x) == INVALID_ARGUMENT);  // a size of part of a page
  x = whole_export(d, sys, kBytes);
  CHECK(status(x) == INVALID_ARGUMENT);  // system memory, from a GPU with memory of its own
  x = good, x.sizes[0] = x.totalSize = 2 * kBytes;
  CHECK(status(x) == INVALID_ARGUMENT);  // past the memory
  x = good, x.offsets[0] = 4096;
  CHECK(status(x) == INVALID_ARGUMENT);  // its end past the memory
  x = good, x.totalSize = 2 * kBytes;
  CHECK(status(x) == INVALID_ARGUMENT);  // the pieces fall short of totalSize
  x = good, x.sizes[0] = 2 * kBytes;
  CHECK(status(x) == INVALID_ARGUMENT);  // a piece past totalSize
  x = good, x.bAllowMmap = 1;  // mmap only where the GPU has no memory of its own
  CHECK(status(x) == NOT_SUPPORTED);
  x = good, x.sizes[0] = x.totalSize = 4096;  // part of a memory: the simulator's own limit
  CHECK(status(x) == NOT_SUPPORTED);
  CHECK(sim.dmabuf_exports() == 0);
  const auto errors = sim.errors();
  REQUIRE(errors.size() >= 20);
  CHECK(std::ranges::count_if(errors, [](auto& e) { return e.find("EXPORT_TO_DMABUF_FD") != e.npos; }) == 20);
  CHECK(std::ranges::any_of(errors, [](auto& e) { return e.find("is not video memory") != e.npos; }));
  CHECK(std::ranges::any_of(errors, [](auto& e) { return e.find("whole pages") != e.npos; }));
  // The GPU goes on: the well-formed export is made.
  x = good;
  REQUIRE(sim.ioctl(d.dev, esc(ESC_EXPORT_DMABUF, sizeof x), &x) == 0);
  CHECK(x.status == OK);
  CHECK(x.fd >= 0);
  ::close(x.fd);
}

TEST_CASE("a work-submit token written at usermode+0x90 rings its channel's doorbell") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  d.channels();
  std::uint32_t token = 0;
  REQUIRE(d.control(d.copy_channel, CTRL_TOKEN, token) == OK);
  // Stored as the driver stores it: an atomic release, which the watcher acquires.
  std::atomic_ref<std::uint32_t> bell(*reinterpret_cast<std::uint32_t*>(d.usermode_page + 0x90));
  bell.store(token, std::memory_order_release);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (sim.doorbells() < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  CHECK(sim.doorbells() == 1);
  CHECK(bell.load(std::memory_order_acquire) == 0);  // taken
  bell.store(0x7777, std::memory_order_release);  // no channel's
  while (sim.stray_doorbells() < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  CHECK(sim.stray_doorbells() == 1);
  CHECK(sim.doorbells() == 1);
}

TEST_CASE("RM refuses bad handles, parents, classes and duplicates with its own codes") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  std::uint32_t h = 0;
  std::uint32_t sub_id = 0;
  // A parent that does not exist, and one of the wrong kind.
  CHECK(d.alloc(0xdead, SUBDEVICE, &sub_id, 4, h) == INVALID_OBJECT_PARENT);
  CHECK(d.alloc(d.root, SUBDEVICE, &sub_id, 4, h) == INVALID_OBJECT_PARENT);
  // A class the GPU lacks: unknown, or another generation's (GH100 has only Hopper's).
  CHECK(d.alloc_bare(d.device, 0xBEEF, h) == INVALID_CLASS);
  std::uint32_t ch = 0;
  d.channels();
  CHECK(d.alloc_bare(d.compute_channel, AMPERE_COMPUTE, ch) == INVALID_CLASS);
  // A compute object on a copy channel.
  CHECK(d.alloc_bare(d.copy_channel, HOPPER_COMPUTE, ch) == INVALID_OBJECT_PARENT);
  // A handle taken.
  std::uint32_t dup = d.vaspace;
  VaSpaceParams va{};
  va.flags = VA_EXTERNALLY_OWNED, va.vaBase = kVaBase, va.vaSize = kVaSize;
  CHECK(d.alloc(d.device, VASPACE, va, dup) == INSERT_DUPLICATE_NAME);
  // No parameters for a class that takes them.
  h = 0;
  CHECK(d.alloc_bare(d.device, VASPACE, h) == INVALID_ARGUMENT);
  // A client that does not exist.
  Alloc21 a{0x1234, d.device, 0, VASPACE, ptr(&va), sizeof va, ~0u};
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_ALLOC, sizeof a), &a) == 0);
  CHECK(a.status == INVALID_CLIENT);
  // NVOS64 is answered in its own status field.
  h = 0;
  CHECK(d.alloc(d.device, 0xBEEF, nullptr, 0, h, true) == INVALID_CLASS);
  h = 0;
  CHECK(d.alloc(d.device, VASPACE, &va, sizeof va, h, true) == OK);
  // Bad channel parameters: entries not a power of two, USERD outside its memory.
  ChannelParams c{};
  c.gpFifoOffset = Driver::kRingVa, c.gpFifoEntries = 1000, c.hContextShare = d.share;
  c.hUserdMemory[0] = d.ring, c.engineType = 1;
  ch = 0;
  CHECK(d.alloc(d.group, HOPPER_CHANNEL, c, ch) == INVALID_ARGUMENT);
  c.gpFifoEntries = 1024, c.userdOffset[0] = Driver::kRingBytes;
  CHECK(d.alloc(d.group, HOPPER_CHANNEL, c, ch) == INVALID_OFFSET);
  c.userdOffset[0] = 0, c.hUserdMemory[0] = 0xabcd;
  CHECK(d.alloc(d.group, HOPPER_CHANNEL, c, ch) == INVALID_OBJECT_HANDLE);
  // Video memory beyond the frame buffer.
  h = 0;
  CHECK(d.memory(VIDMEM, 1ull << 40, h) == NO_MEMORY);
  // Each refusal left words naming it.
  const auto errors = sim.errors();
  CHECK(std::ranges::any_of(errors, [](auto& e) { return e.find("NV_ERR_INVALID_OBJECT_PARENT") != e.npos; }));
  CHECK(std::ranges::any_of(errors, [](auto& e) { return e.find("the GPU has no class 0xbeef") != e.npos; }));
}

TEST_CASE("pointers the caller cannot read or write are refused, never followed") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  auto* nowhere = reinterpret_cast<void*>(0x10);
  // The escape's own struct: the ioctl fails with -EFAULT, as copy_from_user makes it.
  CHECK(sim.ioctl(d.ctl, esc(ESC_CONTROL, sizeof(Control54)), nowhere) == -EFAULT);
  CHECK(sim.ioctl(d.ctl, esc(ESC_CONTROL, sizeof(Control54)), nullptr) == -EFAULT);
  CHECK(sim.ioctl(d.uvm, UVM_CREATE_RANGE, nowhere) == -EFAULT);
  // Parameters behind a pointer: RM's NV_ERR_INVALID_ADDRESS.
  std::uint32_t h = 0;
  CHECK(d.alloc(d.device, VASPACE, nowhere, sizeof(VaSpaceParams), h) == INVALID_ADDRESS);
  CHECK(d.control(d.subdevice, CTRL_GID, nowhere, sizeof(GidParams)) == INVALID_ADDRESS);
  ClassList cl{64, 0, 0x10};
  CHECK(d.control(d.device, CTRL_CLASSLIST, cl) == INVALID_ADDRESS);
  GrInfoParams gi{1, 0, 0x10, 0, 0, 0};
  CHECK(d.control(d.subdevice, CTRL_GR_INFO, gi) == INVALID_ADDRESS);
  BuildVersion bv{64, 0, 0x10, 0x20, 0x30, 0, 0};
  CHECK(d.control(d.root, CTRL_BUILD_VERSION, bv) == INVALID_ADDRESS);
  // Parameters on a read-only page: read, but not written back.
  void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(page != MAP_FAILED);
  REQUIRE(::mprotect(page, 4096, PROT_READ) == 0);
  CHECK(d.control(d.subdevice, CTRL_GID, page, sizeof(GidParams)) == INVALID_ADDRESS);
  ::munmap(page, 4096);
  // An event's data with nowhere to go stays pending.
  const int efd = sim.open("/dev/nvidiactl", O_RDWR);
  OsEvent oe{d.root, d.device, std::uint32_t(efd), ~0u};
  REQUIRE(sim.ioctl(efd, esc(ESC_ALLOC_OS_EVENT, sizeof oe), &oe) == 0);
  EventParams ep{d.root, d.subdevice, OS_EVENT, GR0 | NONSTALL, std::uint64_t(efd)};
  std::uint32_t event = 0;
  REQUIRE(d.alloc(d.subdevice, OS_EVENT, ep, event) == OK);
  sim.fire(GR0, true);
  EventData41 ed{0x10, 0, ~0u};
  REQUIRE(sim.ioctl(efd, esc(ESC_EVENT_DATA, sizeof ed), &ed) == 0);
  CHECK(ed.status == INVALID_ADDRESS);
  pollfd p{efd, POLLIN, 0};
  CHECK(sim.poll(&p, 1, 0) == 1);
  // Other refusals of the same kind: a second device in a client, a debugger of no client.
  DeviceParams dp{};
  h = 0;
  CHECK(d.alloc(d.root, DEVICE, dp, h) == STATE_IN_USE);
  DebuggerParams dbg{0, 0x9999, 0};
  h = 0;
  CHECK(d.alloc(d.device, DEBUGGER, dbg, h) == INVALID_CLIENT);
}

TEST_CASE("a channel group holds at most 128 channels") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  GroupParams g{};
  g.engineType = 1;
  REQUIRE(d.alloc(d.device, GROUP, g, d.group) == OK);
  REQUIRE(d.memory(VIDMEM, 129 * 512, d.ring) == OK);
  ShareParams s{d.vaspace, 1, 0};
  REQUIRE(d.alloc(d.group, CONTEXT_SHARE, s, d.share) == OK);
  for (unsigned i = 0; i <= 128; ++i) {
    ChannelParams c{};
    c.gpFifoOffset = 0x100000, c.gpFifoEntries = 8, c.hContextShare = d.share, c.engineType = 1;
    c.hUserdMemory[0] = d.ring, c.userdOffset[0] = i * 512;
    std::uint32_t h = 0;
    CHECK(d.alloc(d.group, HOPPER_CHANNEL, c, h) == (i < 128 ? OK : INSUFFICIENT_RESOURCES));
  }
}

TEST_CASE("RM_FREE frees the subtree and refuses what is already gone") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  d.channels();
  const std::size_t before = sim.live_objects();
  // The group, its share, its two channels and their two engine objects go together.
  CHECK(d.free(d.group) == OK);
  CHECK(sim.live_objects() == before - 6);
  CHECK(d.free(d.group) == INVALID_OBJECT_HANDLE);
  CHECK(d.free(d.compute_channel) == INVALID_OBJECT_HANDLE);
  Free00 f{0x4242, 0, d.device, ~0u};
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_FREE, sizeof f), &f) == 0);
  CHECK(f.status == INVALID_CLIENT);
  // Freeing the client frees everything.
  CHECK(d.free(d.root) == OK);
  CHECK(sim.live_objects() == 0);
  CHECK(sim.live_cpu_mappings() == 0);
}

TEST_CASE("controls check the command, the object's class and the exact parameter size") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  GidParams gid{};
  CHECK(d.control(d.subdevice, CTRL_GID, &gid, sizeof gid - 4) == INVALID_PARAM_STRUCT);
  CHECK(d.control(d.subdevice, CTRL_GID, &gid, sizeof gid + 4) == INVALID_PARAM_STRUCT);
  CHECK(d.control(d.subdevice, 0x2080FFFF, &gid, sizeof gid) == NOT_SUPPORTED);
  CHECK(d.control(d.device, CTRL_GID, gid) == NOT_SUPPORTED);  // a subdevice's control on the device
  CHECK(d.control(0x5555, CTRL_GID, gid) == INVALID_OBJECT_HANDLE);
  CHECK(d.control(d.subdevice, CTRL_GID, nullptr, sizeof gid) == INVALID_ARGUMENT);
  Control54 c{0x1234, d.subdevice, CTRL_GID, 0, ptr(&gid), sizeof gid, ~0u};
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_CONTROL, sizeof c), &c) == 0);
  CHECK(c.status == INVALID_CLIENT);
  // The UUID in text, as GID_INFO's default format gives it.
  gid.flags = 0;
  CHECK(d.control(d.subdevice, CTRL_GID, gid) == OK);
  CHECK(std::string(reinterpret_cast<char*>(gid.data)).starts_with("GPU-"));
  IdInfo2 id{};
  id.gpuId = 0x999;
  CHECK(d.control(d.root, CTRL_ID_INFO_V2, id) == INVALID_ARGUMENT);
  Notification n{300, 2, 0, 0, 0};
  CHECK(d.control(d.subdevice, CTRL_SET_NOTIFICATION, n) == INVALID_ARGUMENT);
  n = {RC_ERROR, 7, 0, 0, 0};
  CHECK(d.control(d.subdevice, CTRL_SET_NOTIFICATION, n) == INVALID_ARGUMENT);
  ClassList cl{2, 0, 0};
  std::uint32_t small[2];
  cl.list = ptr(small);
  CHECK(d.control(d.device, CTRL_CLASSLIST, cl) == INVALID_PARAM_STRUCT);
  struct { std::uint32_t index, data; } info[1] = {{0x40, 0}};
  GrInfoParams gi{1, 0, ptr(info), 0, 0, 0};
  CHECK(d.control(d.subdevice, CTRL_GR_INFO, gi) == INVALID_ARGUMENT);
  std::uint8_t enable[3] = {1, 0, 0};
  GroupParams g{};
  g.engineType = 1;
  std::uint32_t empty = 0;
  REQUIRE(d.alloc(d.device, GROUP, g, empty) == OK);
  CHECK(d.control(empty, CTRL_SCHEDULE, enable, 3) == INVALID_STATE);
  // Through NV_ESC_IOCTL_XFER_CMD the same control is answered the same.
  gid.flags = 2;
  Control54 inner{d.root, d.subdevice, CTRL_GID, 0, ptr(&gid), sizeof gid, ~0u};
  Xfer x{ESC_CONTROL, sizeof inner, ptr(&inner)};
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_XFER, sizeof x), &x) == 0);
  CHECK(inner.status == OK);
  CHECK(std::memcmp(gid.data, d.uuid, 16) == 0);
}

TEST_CASE("escapes of the wrong size, on the wrong file or unknown fail the ioctl with -EINVAL") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  Alloc21 a{};
  CHECK(sim.ioctl(d.ctl, esc(ESC_ALLOC, 40), &a) == -EINVAL);
  Free00 f{};
  CHECK(sim.ioctl(d.ctl, esc(ESC_FREE, 20), &f) == -EINVAL);
  Control54 c{};
  CHECK(sim.ioctl(d.ctl, esc(ESC_CONTROL, 24), &c) == -EINVAL);
  CHECK(sim.ioctl(d.ctl, esc(0x77, 16), &c) == -EINVAL);
  CardInfo cards[1]{};
  CHECK(sim.ioctl(d.ctl, esc(ESC_CARD_INFO, 70), cards) == -EINVAL);
  std::uint32_t ids[1] = {0x999};
  CHECK(sim.ioctl(d.ctl, esc(ESC_ATTACH, 4), ids) == -EINVAL);
  Map33 m{};
  CHECK(sim.ioctl(d.dev, esc(ESC_MAP, sizeof m), &m) == -EINVAL);       // RM_MAP_MEMORY is the control file's
  AllocMem02 am{};
  CHECK(sim.ioctl(d.ctl, esc(ESC_ALLOC_MEMORY, sizeof am), &am) == -EINVAL);  // and ALLOC_MEMORY the GPU file's
  std::int32_t fd = d.ctl;
  CHECK(sim.ioctl(d.ctl, esc(ESC_REGISTER_FD, 4), &fd) == -EINVAL);  // only a GPU file registers
  fd = 12345;
  const int other = sim.open("/dev/nvidia0", O_RDWR);
  CHECK(sim.ioctl(other, esc(ESC_REGISTER_FD, 4), &fd) == -EINVAL);
  Version v{0, 0, "470.00"};
  CHECK(sim.ioctl(d.ctl, esc(ESC_VERSION, sizeof v), &v) == -EINVAL);
  CHECK(v.reply == 0);
  CHECK(std::string(v.text) == "580.142");
  CHECK(sim.open("/dev/nvidia1", O_RDWR) == -ENOENT);
  CHECK(sim.ioctl(d.ctl, 0x1234, &c) == -ENOTTY);
  CHECK(sim.close(d.ctl + 1000) == -EBADF);
}

TEST_CASE("CPU mappings: one per GPU file, through that file, torn down with the memory") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  std::uint32_t mem = 0;
  REQUIRE(d.memory(VIDMEM, 65536, mem) == OK);
  int file = -1;
  std::uint64_t linear = 0;
  d.map_cpu(d.device, mem, 65536, &file, &linear);
  CHECK(sim.live_cpu_mappings() == 2);  // the usermode page's and this one
  // A second mapping on the same file.
  Map33 m{d.root, d.device, mem, 0, 0, 4096, 0, ~0u, 0, file, 0};
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_MAP, sizeof m), &m) == 0);
  CHECK(m.status == STATE_IN_USE);
  // A file never registered, a range past the memory, an object that is none.
  const int fresh = sim.open("/dev/nvidia0", O_RDWR);
  m.fd = fresh, m.status = ~0u;
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_MAP, sizeof m), &m) == 0);
  CHECK(m.status == INVALID_ARGUMENT);
  std::int32_t ctl_fd = d.ctl;
  REQUIRE(sim.ioctl(fresh, esc(ESC_REGISTER_FD, 4), &ctl_fd) == 0);
  m.length = 65536 + 4096;
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_MAP, sizeof m), &m) == 0);
  CHECK(m.status == INVALID_LIMIT);
  m.length = 4096, m.hMemory = 0x7777;
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_MAP, sizeof m), &m) == 0);
  CHECK(m.status == OBJECT_NOT_FOUND);
  m.hMemory = mem, m.hDevice = d.vaspace;
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_MAP, sizeof m), &m) == 0);
  CHECK(m.status == INVALID_OBJECT_HANDLE);
  // mmap of a file with no mapping context, or of the wrong length.
  CHECK(sim.mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fresh, 0).error() == -EINVAL);
  CHECK(sim.mmap(nullptr, 4096, PROT_READ, MAP_SHARED, file, 0).error() == -EINVAL);
  // Unmap by the address RM gave; a second unmap finds nothing.
  Unmap34 u{d.root, d.device, mem, 0, linear, ~0u, 0};
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_UNMAP, sizeof u), &u) == 0);
  CHECK(u.status == OK);
  CHECK(sim.live_cpu_mappings() == 1);
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_UNMAP, sizeof u), &u) == 0);
  CHECK(u.status == INVALID_ARGUMENT);
  // Freeing memory still mapped tears its mapping context down, as RM does.
  std::uint32_t mem2 = 0;
  REQUIRE(d.memory(SYSMEM, 4096, mem2) == OK);
  d.map_cpu(d.device, mem2, 4096);
  CHECK(sim.live_cpu_mappings() == 2);
  CHECK(d.free(mem2) == OK);
  CHECK(sim.live_cpu_mappings() == 1);
  // Mapping freed memory: RM no longer knows the handle.
  const int third = sim.open("/dev/nvidia0", O_RDWR);
  REQUIRE(sim.ioctl(third, esc(ESC_REGISTER_FD, 4), &ctl_fd) == 0);
  Map33 m2{d.root, d.device, mem2, 0, 0, 4096, 0, ~0u, 0, third, 0};
  REQUIRE(sim.ioctl(d.ctl, esc(ESC_MAP, sizeof m2), &m2) == 0);
  CHECK(m2.status == OBJECT_NOT_FOUND);
}

TEST_CASE("UVM refuses with its own codes and keeps mapped memory alive until it unmaps") {
  nvsim::Simulator sim;
  Driver d(sim);
  // Before INITIALIZE, every ioctl but the initializations is an illegal action.
  d.uvm = sim.open("/dev/nvidia-uvm", O_RDWR);
  UvmRange early{0x1000000, 0x1000, ~0u, 0};
  REQUIRE(sim.ioctl(d.uvm, UVM_CREATE_RANGE, &early) == 0);
  CHECK(early.status == ILLEGAL_ACTION);
  sim.close(d.uvm);
  d.open_device();
  // INITIALIZE again with other flags; MM_INITIALIZE naming a file that is no VA space.
  UvmInit again{1, ~0u, 0};
  REQUIRE(sim.ioctl(d.uvm, UVM_INITIALIZE, &again) == 0);
  CHECK(again.status == INVALID_ARGUMENT);
  const int third = sim.open("/dev/nvidia-uvm", O_RDWR);
  UvmMmInit mm{third, ~0u};
  REQUIRE(sim.ioctl(third, UVM_MM_INITIALIZE, &mm) == 0);
  CHECK(mm.status == INVALID_ARGUMENT);
  // A GPU that is not there, and one registered twice.
  UvmRegisterGpu rg{};
  rg.uuid[0] = 0xEE, rg.rmCtrlFd = -1;
  REQUIRE(sim.ioctl(d.uvm, UVM_REGISTER_GPU, &rg) == 0);
  CHECK(rg.status == GPU_UUID_NOT_FOUND);
  std::memcpy(rg.uuid, d.uuid, 16);
  REQUIRE(sim.ioctl(d.uvm, UVM_REGISTER_GPU, &rg) == 0);
  CHECK(rg.status == IN_USE);
  // A VA space not made externally owned.
  VaSpaceParams va{};
  va.vaBase = kVaBase, va.vaSize = kVaSize;
  std::uint32_t own = 0;
  REQUIRE(d.alloc(d.device, VASPACE, va, own) == OK);
  const int fresh = sim.open("/dev/nvidia-uvm", O_RDWR);
  UvmInit init{0, ~0u, 0};
  REQUIRE(sim.ioctl(fresh, UVM_INITIALIZE, &init) == 0);
  std::memcpy(rg.uuid, d.uuid, 16);
  REQUIRE(sim.ioctl(fresh, UVM_REGISTER_GPU, &rg) == 0);
  UvmRegisterVaSpace rv{};
  std::memcpy(rv.uuid, d.uuid, 16);
  rv.rmCtrlFd = d.ctl, rv.hClient = d.root, rv.hVaSpace = own;
  REQUIRE(sim.ioctl(fresh, UVM_REGISTER_GPU_VASPACE, &rv) == 0);
  CHECK(rv.status == INVALID_FLAGS);
  rv.hVaSpace = 0x4321;
  REQUIRE(sim.ioctl(fresh, UVM_REGISTER_GPU_VASPACE, &rv) == 0);
  CHECK(rv.status == OBJECT_NOT_FOUND);
  // Ranges: unaligned, overlapping.
  const std::uint64_t base = 0x500000000;
  CHECK(d.uvm_range(base + 8, 0x10000) == INVALID_ADDRESS);
  CHECK(d.uvm_range(base, 0) == INVALID_ADDRESS);
  REQUIRE(d.uvm_range(base, 0x100000) == OK);
  CHECK(d.uvm_range(base + 0x80000, 0x100000) == UVM_ADDRESS_IN_USE);
  CHECK(d.uvm_range(base - 0x1000, 0x2000) == UVM_ADDRESS_IN_USE);
  // Maps: outside a range, past the memory, bad attributes, no GPU VA space, a freed handle.
  std::uint32_t mem = 0;
  REQUIRE(d.memory(VIDMEM, 0x10000, mem) == OK);
  CHECK(d.uvm_map(base + 0xF0000, mem, 0x20000) == INVALID_ADDRESS);
  CHECK(d.uvm_map(0x900000000, mem, 0x10000) == INVALID_ADDRESS);
  CHECK(d.uvm_map(base, mem, 0x10000, 0x1000) == INVALID_OFFSET);
  CHECK(d.uvm_map(base, mem, 0x10000, 0, 9) == INVALID_ARGUMENT);
  CHECK(d.uvm_map(base, 0x6666, 0x10000) == OBJECT_NOT_FOUND);
  std::uint8_t real_uuid[16];
  std::memcpy(real_uuid, d.uuid, 16);
  d.uuid[0] ^= 1;
  CHECK(d.uvm_map(base, mem, 0x10000) == INVALID_DEVICE);
  std::memcpy(d.uuid, real_uuid, 16);
  // Read-only mappings refuse the GPU's writes (Space::map for a write).
  REQUIRE(d.uvm_map(base, mem, 0x10000, 0, 3) == OK);
  // The memory stays the GPU's after RM_FREE, until UVM_FREE.
  std::byte* cpu = d.map_cpu(d.device, mem, 0x10000);
  std::memcpy(cpu, "alive", 6);
  REQUIRE(d.free(mem) == OK);
  char text[6]{};
  REQUIRE(sim.read_gpu(d.root, d.vaspace, base, text, 6));
  CHECK(std::string(text) == "alive");
  CHECK(d.uvm_map(base, mem, 0x10000) == OBJECT_NOT_FOUND);  // the handle is gone
  CHECK(d.uvm_free(base, 0x1000) == INVALID_ADDRESS);         // not the range's length
  CHECK(d.uvm_free(base + 0x1000, 0x100000) == INVALID_ADDRESS);
  CHECK(sim.live_uvm_maps() == 1);
  CHECK(d.uvm_free(base, 0x100000) == OK);
  CHECK(sim.live_uvm_maps() == 0);
  CHECK(sim.live_uvm_ranges() == 0);
  CHECK_FALSE(sim.read_gpu(d.root, d.vaspace, base, text, 6));
  // A channel of another VA space, twice, or overlapping a range.
  d.channels();
  UvmRegisterChannel rc{};
  std::memcpy(rc.uuid, d.uuid, 16);
  rc.rmCtrlFd = d.ctl, rc.hClient = d.root, rc.hChannel = d.compute_channel, rc.base = Driver::kRingVa,
  rc.length = 0x1000;
  REQUIRE(sim.ioctl(d.uvm, UVM_REGISTER_CHANNEL, &rc) == 0);
  CHECK(rc.status == UVM_ADDRESS_IN_USE);
  rc.base = 0x700000000;
  REQUIRE(sim.ioctl(d.uvm, UVM_REGISTER_CHANNEL, &rc) == 0);
  CHECK(rc.status == OK);
  REQUIRE(sim.ioctl(d.uvm, UVM_REGISTER_CHANNEL, &rc) == 0);
  CHECK(rc.status == INVALID_CHANNEL);
  rc.hChannel = d.group;
  REQUIRE(sim.ioctl(d.uvm, UVM_REGISTER_CHANNEL, &rc) == 0);
  CHECK(rc.status == OBJECT_NOT_FOUND);
  CHECK(sim.ioctl(d.uvm, 0x999, &rc) == -EINVAL);
  // Unregistering drops the channel's range, once; it may be registered again after.
  const std::size_t registered = sim.live_uvm_ranges();
  UvmUnregisterChannel un{};
  std::memcpy(un.uuid, d.uuid, 16);
  un.hClient = d.root, un.hChannel = d.compute_channel;
  REQUIRE(sim.ioctl(d.uvm, UVM_UNREGISTER_CHANNEL, &un) == 0);
  CHECK(un.status == OK);
  CHECK(sim.live_uvm_ranges() == registered - 1);
  REQUIRE(sim.ioctl(d.uvm, UVM_UNREGISTER_CHANNEL, &un) == 0);
  CHECK(un.status == INVALID_CHANNEL);
  rc.hChannel = d.compute_channel;
  REQUIRE(sim.ioctl(d.uvm, UVM_REGISTER_CHANNEL, &rc) == 0);
  CHECK(rc.status == OK);
  // Freeing the channel drops its UVM range.
  const std::size_t ranges = sim.live_uvm_ranges();
  CHECK(d.free(d.compute_channel) == OK);
  CHECK(sim.live_uvm_ranges() == ranges - 1);
}

TEST_CASE("OS events: NONSTALL ones fire on their engine's interrupt, others only when notification is on") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  const int efd = sim.open("/dev/nvidiactl", O_RDWR);
  OsEvent oe{d.root, d.device, std::uint32_t(efd), ~0u};
  REQUIRE(sim.ioctl(efd, esc(ESC_ALLOC_OS_EVENT, sizeof oe), &oe) == 0);
  REQUIRE(oe.status == OK);
  REQUIRE(sim.ioctl(efd, esc(ESC_ALLOC_OS_EVENT, sizeof oe), &oe) == 0);
  CHECK(oe.status == INVALID_ARGUMENT);  // twice
  EventParams ep{d.root, d.subdevice, OS_EVENT, GR0 | NONSTALL, std::uint64_t(efd)};
  std::uint32_t nonstall = 0;
  REQUIRE(d.alloc(d.subdevice, OS_EVENT, ep, nonstall) == OK);
  EventParams rc_ep{d.root, d.subdevice, OS_EVENT, RC_ERROR, std::uint64_t(efd)};
  std::uint32_t rc_event = 0;
  REQUIRE(d.alloc(d.subdevice, OS_EVENT, rc_ep, rc_event) == OK);
  // Refusals: a file with no OS event, an index out of range, the wrong class in the params.
  EventParams bad{d.root, d.subdevice, OS_EVENT, GR0, std::uint64_t(d.ctl)};
  std::uint32_t h = 0;
  CHECK(d.alloc(d.subdevice, OS_EVENT, bad, h) == INVALID_ARGUMENT);
  bad = {d.root, d.subdevice, OS_EVENT, 500, std::uint64_t(efd)};
  CHECK(d.alloc(d.subdevice, OS_EVENT, bad, h) == INVALID_ARGUMENT);
  bad = {d.root, d.subdevice, 0x80, GR0, std::uint64_t(efd)};
  CHECK(d.alloc(d.subdevice, OS_EVENT, bad, h) == INVALID_CLASS);
  pollfd p{efd, POLLIN, 0};
  CHECK(sim.poll(&p, 1, 0) == 0);
  sim.fire(GR0, true);
  CHECK(sim.poll(&p, 1, 1000) == 1);
  CHECK((p.revents & POLLIN) != 0);
  struct { std::uint32_t hObject, index, info32; std::uint16_t info16, pad; } e{};
  EventData41 ed{ptr(&e), 0, ~0u};
  REQUIRE(sim.ioctl(efd, esc(ESC_EVENT_DATA, sizeof ed), &ed) == 0);
  CHECK(ed.status == OK);
  CHECK(e.hObject == nonstall);
  CHECK(e.index == GR0);
  REQUIRE(sim.ioctl(efd, esc(ESC_EVENT_DATA, sizeof ed), &ed) == 0);
  CHECK(ed.status == GENERIC);  // nothing more
  // The RC-error event fires only once notification is enabled (REPEAT: every time).
  sim.fire(RC_ERROR, false);
  CHECK(sim.poll(&p, 1, 0) == 0);
  Notification n{RC_ERROR, 2, 0, 0, 0};
  REQUIRE(d.control(d.subdevice, CTRL_SET_NOTIFICATION, n) == OK);
  sim.fire(RC_ERROR, false);
  sim.fire(RC_ERROR, false);
  REQUIRE(sim.ioctl(efd, esc(ESC_EVENT_DATA, sizeof ed), &ed) == 0);
  CHECK(ed.status == OK);
  CHECK(e.hObject == rc_event);
  CHECK(ed.more == 1);
  // FREE_OS_EVENT once, then there is none.
  REQUIRE(sim.ioctl(efd, esc(ESC_FREE_OS_EVENT, sizeof oe), &oe) == 0);
  CHECK(oe.status == OK);
  REQUIRE(sim.ioctl(efd, esc(ESC_FREE_OS_EVENT, sizeof oe), &oe) == 0);
  CHECK(oe.status == INVALID_ARGUMENT);
}

TEST_CASE("closing the control file frees its clients and a closed simulator leaves nothing alive") {
  nvsim::Simulator sim;
  {
    Driver d(sim);
    d.open_device();
    d.channels();
    CHECK(sim.live_objects() > 10);
    CHECK(sim.close(d.ctl) == 0);
    CHECK(sim.live_objects() == 0);
    CHECK(sim.live_cpu_mappings() == 0);
    CHECK(sim.close(d.uvm) == 0);
    CHECK(sim.live_uvm_ranges() == 0);
    CHECK(sim.live_uvm_maps() == 0);
    for (int fd : {d.uvm_mm, d.dev}) CHECK(sim.close(fd) == 0);
  }
  // The usermode and ring mappings the test made are still the test's to unmap; the files
  // that backed them are closed.
  CHECK(sim.open_files() == 2);  // the GPU files map_cpu opened for the usermode page and the ring
}

TEST_CASE("gvisor mode refuses what nvproxy refuses under compute and utility") {
  nvsim::Config config;
  config.gvisor = true;
  nvsim::Simulator sim(config);
  Driver d(sim);
  d.open_device();
  BuildVersion2 bv2{};
  CHECK(d.control(d.root, CTRL_BUILD_VERSION_V2, bv2) == NOT_SUPPORTED);
  char a[64]{}, b[64]{}, c[64]{};
  BuildVersion bv{64, 0, ptr(a), ptr(b), ptr(c), 0, 0};
  CHECK(d.control(d.root, CTRL_BUILD_VERSION, bv) == OK);
  Version v{'2', 0, {}};
  CHECK(sim.ioctl(d.ctl, esc(ESC_VERSION, sizeof v), &v) == 0);
  VirtualParams vp{0, 0x1ffffffffffff, 0, 0};
  std::uint32_t virt = 0;
  CHECK(d.alloc(d.device, VIRTUAL, vp, virt) == INVALID_CLASS);
  std::uint8_t dma[64]{};
  CHECK(sim.ioctl(d.ctl, esc(ESC_MAP_DMA, sizeof dma), dma) == -EINVAL);
  AllocMem02 other{d.root, d.device, 0, VASPACE, 0, 0, 0, 4095, ~0u, 0, d.dev, 0};
  CHECK(sim.ioctl(d.dev, esc(ESC_ALLOC_MEMORY, sizeof other), &other) == -EINVAL);
  AllocMem02 sys{d.root, d.device, 0, SYSMEM, 0, 0, 0, 4095, ~0u, 0, d.dev, 0};
  CHECK(sim.ioctl(d.dev, esc(ESC_ALLOC_MEMORY, sizeof sys), &sys) == 0);  // nvproxy passes it on
  CHECK(sys.status == NOT_SUPPORTED);  // the simulator makes system memory through RM_ALLOC
  DmabufExport x{};
  x.fd = -1, x.hClient = d.root, x.totalObjects = x.numObjects = 1, x.totalSize = 4096, x.sizes[0] = 4096;
  CHECK(sim.ioctl(d.dev, esc(ESC_EXPORT_DMABUF, sizeof x), &x) == -EINVAL);  // needs nvproxy's rdma capability
  const auto errors = sim.errors();
  CHECK(std::ranges::count_if(errors, [](auto& e) { return e.find("nvproxy") != e.npos; }) == 5);
  // What CUDA needs still works: channels and UVM mappings.
  d.channels();
  CHECK(sim.live_uvm_maps() == 1);
}

TEST_CASE("the Ampere table offers Ampere's classes and refuses Hopper's") {
  nvsim::Config config;
  config.classes = nvsim::kAmpere;
  nvsim::Simulator sim(config);
  Driver d(sim);
  d.ctl = sim.open("/dev/nvidiactl", O_RDWR);
  REQUIRE(d.alloc_bare(0, ROOT, d.root) == OK);
  DeviceParams dp{};
  REQUIRE(d.alloc(d.root, DEVICE, dp, d.device) == OK);
  std::uint32_t sub_id = 0;
  REQUIRE(d.alloc(d.device, SUBDEVICE, &sub_id, 4, d.subdevice) == OK);
  std::uint32_t h = 0;
  CHECK(d.alloc_bare(d.subdevice, HOPPER_USERMODE, h) == INVALID_CLASS);
  CHECK(d.alloc_bare(d.subdevice, 0xC461, h) == OK);
  ClassList2 cl2{};
  REQUIRE(d.control(d.device, CTRL_CLASSLIST_V2, cl2) == OK);
  const std::vector<std::uint32_t> list(cl2.list, cl2.list + cl2.count);
  CHECK(std::ranges::count(list, AMPERE_COMPUTE) == 1);
  CHECK(std::ranges::count(list, HOPPER_COMPUTE) == 0);
  struct { std::uint32_t index, data; } info[1] = {{0x0C, 0}};
  GrInfoParams gi{1, 0, ptr(info), 0, 0, 0};
  CHECK(d.control(d.subdevice, CTRL_GR_INFO, gi) == OK);
  CHECK(info[0].data == 0x800);
}

TEST_CASE("fail_next_ioctl fails the next call of that request once") {
  nvsim::Simulator sim;
  const int ctl = sim.open("/dev/nvidiactl", O_RDWR);
  Alloc21 a{0, 0, 0, ROOT, 0, 0, ~0u};
  sim.fail_next_ioctl(esc(ESC_ALLOC, sizeof a), -ENOMEM);
  CHECK(sim.ioctl(ctl, esc(ESC_ALLOC, sizeof a), &a) == -ENOMEM);
  CHECK(sim.live_objects() == 0);
  CHECK(sim.ioctl(ctl, esc(ESC_ALLOC, sizeof a), &a) == 0);
  CHECK(a.status == OK);
  CHECK(sim.live_objects() == 1);
  // Paths that are not the simulator's go to the system.
  const int real = sim.open("/proc/self/stat", O_RDONLY);
  CHECK(real >= 0);
  char buf[8];
  CHECK(sim.read(real, buf, sizeof buf) > 0);
  CHECK(sim.close(real) == 0);
}

// ---- Work run end to end: push buffers on the channels' rings, doorbells, the engines.

#ifdef RIG_NV_KERNELS
#include <elf.h>

#include <fstream>
#include <iterator>

namespace {

std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

// The bytes of section `name` of an ELF64 file (a cubin), as a driver copies .text.<fn>.
std::vector<std::byte> section(const std::vector<std::byte>& elf, const std::string& name) {
  Elf64_Ehdr eh;
  REQUIRE(elf.size() >= sizeof eh);
  std::memcpy(&eh, elf.data(), sizeof eh);
  auto header = [&](unsigned i) {
    Elf64_Shdr sh;
    REQUIRE(eh.e_shoff + (i + 1) * sizeof sh <= elf.size());
    std::memcpy(&sh, elf.data() + eh.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
  };
  const Elf64_Shdr names = header(eh.e_shstrndx);
  for (unsigned i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sh = header(i);
    const char* n = reinterpret_cast<const char*>(elf.data() + names.sh_offset + sh.sh_name);
    if (n == name) return {elf.begin() + long(sh.sh_offset), elf.begin() + long(sh.sh_offset + sh.sh_size)};
  }
  FAIL("no section " << name);
  return {};
}

// Sets bits [lo, hi] of a little-endian bit array of 32-bit words to `value` (a QMD field as
// the facts number its bits).
void set_field(std::uint32_t* words, unsigned hi, unsigned lo, std::uint64_t value) {
  for (unsigned bit = lo; bit <= hi; ++bit, value >>= 1) {
    std::uint32_t& w = words[bit / 32];
    w = (w & ~(1u << (bit % 32))) | (std::uint32_t(value & 1) << (bit % 32));
  }
}

constexpr std::uint32_t method(std::uint32_t sub, std::uint32_t m, std::uint32_t count) {
  return (1u << 29) | (count << 16) | (sub << 13) | (m >> 2);  // incrementing method header
}

// A driver's submission path on one channel: push buffer words written at the CPU view of the
// ring buffer, a GP entry, GPPut in USERD, the token at usermode+0x90.
struct Submitter {
  Driver& d;
  std::uint32_t channel;
  std::uint64_t gpfifo_off, userd_off, pb_off;
  std::uint32_t put = 0, token = 0;
  std::uint64_t pb_used = 0;

  Submitter(Driver& driver, std::uint32_t ch, unsigned index)
      : d(driver), channel(ch), gpfifo_off(std::uint64_t(index) * 0x10000), userd_off(0x200000 + index * 0x1000),
        pb_off(0x100000 + index * 0x80000) {
    REQUIRE(d.control(channel, CTRL_TOKEN, token) == OK);
  }
  void submit(const std::vector<std::uint32_t>& words) {
    const std::uint64_t at = pb_off + pb_used;
    std::memcpy(d.ring_cpu + at, words.data(), words.size() * 4);
    pb_used += (words.size() * 4 + 255) & ~std::uint64_t(255);
    const std::uint64_t va = Driver::kRingVa + at;
    const std::uint32_t entry[2] = {std::uint32_t(va) & ~3u,
                                    std::uint32_t(va >> 32) | (std::uint32_t(words.size()) << 10)};
    std::memcpy(d.ring_cpu + gpfifo_off + put * 8, entry, 8);
    put = (put + 1) % 1024;
    std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(d.ring_cpu + userd_off + 0x8C))
        .store(put, std::memory_order_release);
    std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(d.usermode_page + 0x90))
        .store(token, std::memory_order_release);
  }
};

std::vector<std::uint32_t> release(std::uint64_t va, std::uint32_t payload) {
  return {method(0, 0x5C, 5), std::uint32_t(va), std::uint32_t(va >> 32), payload, 0, 1 /* RELEASE */};
}

bool wait_for(const std::byte* word, std::uint32_t value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::atomic_ref<const std::uint32_t>(*reinterpret_cast<const std::uint32_t*>(word))
            .load(std::memory_order_acquire) == value)
      return true;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return false;
}

}  // namespace

TEST_CASE("a semaphore release, a copy and an nvcc kernel's launch run end to end through the rings and doorbells") {
  nvsim::Simulator sim;
  const std::string dir = RIG_NV_KERNELS;
  REQUIRE(sim.code().add_fatbin(file_bytes(dir + "/saxpy.sm_90.fatbin"), 90, "saxpy").value() == 1);
  Driver d(sim);
  d.open_device();
  d.channels();
  // An OS event for the compute engine's nonstall interrupt.
  const int efd = sim.open("/dev/nvidiactl", O_RDWR);
  OsEvent oe{d.root, d.device, std::uint32_t(efd), ~0u};
  REQUIRE(sim.ioctl(efd, esc(ESC_ALLOC_OS_EVENT, sizeof oe), &oe) == 0);
  EventParams ep{d.root, d.subdevice, OS_EVENT, GR0 | NONSTALL, std::uint64_t(efd)};
  std::uint32_t event = 0;
  REQUIRE(d.alloc(d.subdevice, OS_EVENT, ep, event) == OK);
  std::uint8_t enable[3] = {1, 0, 0};
  REQUIRE(d.control(d.group, CTRL_SCHEDULE, enable, 3) == OK);
  Submitter compute(d, d.compute_channel, 0), copy(d, d.copy_channel, 1);
  const std::uint64_t sem_off = 0x280000, sem_va = Driver::kRingVa + sem_off;
  std::byte* sem = d.ring_cpu + sem_off;

  // 1. A host semaphore release, then NON_STALL_INTERRUPT.
  compute.submit({method(1, 0, 1), HOPPER_COMPUTE});
  auto words = release(sem_va, 1);
  words.push_back(method(0, 0x20, 1));
  words.push_back(0);
  compute.submit(words);
  REQUIRE(wait_for(sem, 1));
  pollfd p{efd, POLLIN, 0};
  CHECK(sim.poll(&p, 1, 5000) == 1);

  // 2. A copy engine LAUNCH_DMA of 4000 bytes, then a release on the copy channel.
  std::uint32_t data = 0;
  REQUIRE(d.memory(VIDMEM, 1 << 20, data) == OK);
  std::byte* cpu = d.map_cpu(d.device, data, 1 << 20);
  const std::uint64_t va = 0x400000000;
  REQUIRE(d.uvm_range(va, 1 << 20) == OK);
  REQUIRE(d.uvm_map(va, data, 1 << 20) == OK);
  for (int i = 0; i < 4000; ++i) cpu[i] = std::byte(i * 13);
  const std::uint64_t src = va, dst = va + 0x10000;
  copy.submit({method(4, 0, 1), HOPPER_COPY, method(4, 0x400, 8), std::uint32_t(src >> 32), std::uint32_t(src),
               std::uint32_t(dst >> 32), std::uint32_t(dst), 0, 0, 4000, 1, method(4, 0x300, 1),
               2u | (1u << 2) | (1u << 7) | (1u << 8) /* NON_PIPELINED, FLUSH, pitch in and out */});
  copy.submit(release(sem_va + 16, 2));
  REQUIRE(wait_for(sem + 16, 2));
  CHECK(std::memcmp(cpu, cpu + 0x10000, 4000) == 0);
  CHECK(cpu[0x10000 + 4000] == std::byte{0});

  // 3. saxpy on 1000 of 1024 elements: its SASS copied in, constant bank 0 with the
  // parameters at 0x210, a QMD V04_00 built from the facts' bit positions.
  const auto text = section(file_bytes(dir + "/saxpy.sm_90.cubin"), ".text.saxpy");
  const std::uint64_t code_off = 0x80000, bank_off = 0x90000, qmd_off = 0x90400, x_off = 0x20000, y_off = 0x30000;
  std::memcpy(cpu + code_off, text.data(), text.size());
  for (std::uint32_t i = 0; i < 1024; ++i) {
    const float x = float(i), y = 1.0f;
    std::memcpy(cpu + x_off + 4 * i, &x, 4);
    std::memcpy(cpu + y_off + 4 * i, &y, 4);
  }
  const float a = 2.0f;
  const std::uint64_t x_va = va + x_off, y_va = va + y_off;
  const std::uint32_t n = 1000, block = 256, grid = 4;
  std::byte* bank = cpu + bank_off;
  const std::uint32_t dims[6] = {block, 1, 1, grid, 1, 1};  // driver slots 0x00 and 0x0c
  std::memcpy(bank, dims, sizeof dims);
  std::memcpy(bank + 0x210, &a, 4);
  std::memcpy(bank + 0x218, &x_va, 8);
  std::memcpy(bank + 0x220, &y_va, 8);
  std::memcpy(bank + 0x228, &n, 4);
  std::uint32_t qmd[96]{};
  set_field(qmd, 583, 580, 4);  // QMD_MAJOR_VERSION
  set_field(qmd, 579, 576, 0);
  set_field(qmd, 25, 23, 2);    // QMD_TYPE GRID_CTA
  set_field(qmd, 568, 568, 1);  // API_VISIBLE_CALL_LIMIT
  set_field(qmd, 543, 536, 0x90);
  set_field(qmd, 1055, 1024, grid);
  set_field(qmd, 1071, 1056, 1);
  set_field(qmd, 1103, 1088, 1);
  set_field(qmd, 1167, 1152, block);
  set_field(qmd, 1183, 1168, 1);
  set_field(qmd, 1199, 1184, 1);
  set_field(qmd, 1208, 1200, 64);  // REGISTER_COUNT
  const std::uint64_t program = va + code_off, bank_va = va + bank_off;
  set_field(qmd, 1247, 1216, program & 0xffffffff);
  set_field(qmd, 1272, 1248, program >> 32);
  set_field(qmd, 416, 416, 1);  // CONSTANT_BUFFER_VALID(0)
  set_field(qmd, 1567, 1536, (bank_va >> 6) & 0xffffffff);
  set_field(qmd, 1586, 1568, bank_va >> 38);
  set_field(qmd, 1599, 1587, 0x230 >> 4);
  std::memcpy(cpu + qmd_off, qmd, sizeof qmd);
  const std::uint64_t qmd_va = va + qmd_off;
  auto launch = std::vector<std::uint32_t>{method(1, 0x2B4, 1), std::uint32_t(qmd_va >> 8), method(1, 0x2C0, 1), 9};
  const auto after = release(sem_va + 32, 3);
  launch.insert(launch.end(), after.begin(), after.end());
  compute.submit(launch);
  REQUIRE(wait_for(sem + 32, 3));
  for (std::uint32_t i = 0; i < 1024; ++i) {
    float y;
    std::memcpy(&y, cpu + y_off + 4 * i, 4);
    if (i < n) CHECK(y == 2.0f * float(i) + 1.0f);
    else CHECK(y == 1.0f);
  }
  CHECK(sim.faults().empty());
  // Unmapping and freeing what the engines ran on, and the channels themselves, with the
  // engines running: they stop, and nothing is left of the group.
  CHECK(d.uvm_free(va, 1 << 20) == OK);
  const std::size_t before = sim.live_objects();
  CHECK(d.free(d.group) == OK);
  CHECK(sim.live_objects() == before - 6);
  // Five tokens written, two pairs back to back: a pair may reach the watcher as one ring.
  CHECK(sim.doorbells() >= 3);
  CHECK(sim.stray_doorbells() == 0);
}

TEST_CASE("a channel that faults writes its error notifier, logs the fault and fires the RC-error event") {
  nvsim::Simulator sim;
  Driver d(sim);
  d.open_device();
  d.channels();
  const int efd = sim.open("/dev/nvidiactl", O_RDWR);
  OsEvent oe{d.root, d.device, std::uint32_t(efd), ~0u};
  REQUIRE(sim.ioctl(efd, esc(ESC_ALLOC_OS_EVENT, sizeof oe), &oe) == 0);
  EventParams ep{d.root, d.subdevice, OS_EVENT, RC_ERROR, std::uint64_t(efd)};
  std::uint32_t event = 0;
  REQUIRE(d.alloc(d.subdevice, OS_EVENT, ep, event) == OK);
  Notification n{RC_ERROR, 2, 0, 0, 0};
  REQUIRE(d.control(d.subdevice, CTRL_SET_NOTIFICATION, n) == OK);
  std::byte* notifier = d.map_cpu(d.device, d.notifier, 4096);
  std::uint8_t enable[3] = {1, 0, 0};
  REQUIRE(d.control(d.group, CTRL_SCHEDULE, enable, 3) == OK);
  Submitter compute(d, d.compute_channel, 0);
  compute.submit({method(1, 0, 1), HOPPER_COPY});  // a class not allocated on the channel
  pollfd p{efd, POLLIN, 0};
  REQUIRE(sim.poll(&p, 1, 10000) == 1);
  struct { std::uint32_t hObject, index, info32; std::uint16_t info16, pad; } e{};
  EventData41 ed{ptr(&e), 0, ~0u};
  REQUIRE(sim.ioctl(efd, esc(ESC_EVENT_DATA, sizeof ed), &ed) == 0);
  CHECK(ed.status == OK);
  CHECK(e.hObject == event);
  CHECK(e.info32 == 69);  // Xid 69: a class error
  std::uint32_t info32;
  std::uint16_t status;
  std::memcpy(&info32, notifier + 8, 4);
  std::memcpy(&status, notifier + 14, 2);
  CHECK(info32 == 69);
  CHECK(status == 0xffff);
  const auto faults = sim.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].find("Xid 69") != std::string::npos);
  CHECK(faults[0].find("0xc8b5") != std::string::npos);
}
#endif
