// The NVIDIA driver's device (device.hpp): the bring-up, the facts, closing; rig/nv.hpp's opener.
#include "device.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace rig::nv::driver {

const rig_driver Device::kTable{room, submit, commit, settle, nullptr};

std::string Device::failed(std::string_view step, const std::string& why) const {
  return fmt::format("{}: {}: {}", name_, step, why);
}

namespace {
// The kernel driver's version through rm's control file and client: CHECK_VERSION_STR's QUERY
// answers it without judging ours; where it fails, the legacy GET_BUILD_VERSION control (which
// gVisor's nvproxy allows) does.
Result<std::string> read_version(Rm& rm) {
  RmApiVersion q{kVersionQuery, 0, {}};
  if (auto r = rm.escape(rm.ctl, kEscCheckVersion, &q, sizeof q, "CHECK_VERSION_STR"); r && q.reply == kVersionRecognized)
    return std::string(q.versionString, strnlen(q.versionString, sizeof q.versionString));
  else if (!r && !rm.root)
    return std::unexpected(r.error());
  char driver[64]{}, build[64]{}, title[64]{};
  BuildVersionParams b{sizeof driver, 0, reinterpret_cast<std::uint64_t>(driver),
                       reinterpret_cast<std::uint64_t>(build), reinterpret_cast<std::uint64_t>(title), 0, 0};
  if (auto legacy = rm.control(rm.root, kCtrlBuildVersion, &b, sizeof b, "GET_BUILD_VERSION"); !legacy)
    return std::unexpected("CHECK_VERSION_STR did not answer; " + legacy.error());
  return std::string(driver, strnlen(driver, sizeof driver));
}
}  // namespace

Result<void> Device::check_version() {
  auto read = read_version(rm_);
  if (!read) return std::unexpected(failed("reading the kernel driver's version", read.error()));
  const std::string version = *read;
  const std::string branch = version.substr(0, version.find('.'));
  if (branch == kKnownBranch) return {};
  const char* ok = std::getenv(kVersionOverride);
  if (ok && std::string_view(ok) == "1") return {};
  return std::unexpected(fmt::format(
      "{}: the NVIDIA kernel driver is version {}, whose structs rig's NVIDIA driver does not know (it knows the {} "
      "branch); install a {} driver, or set {}=1 to open it anyway for experiments",
      name_, version.empty() ? "(empty)" : version, kKnownBranch, kKnownBranch, kVersionOverride));
}

Result<void> Device::open() {
  os::Seam& seam = rm_.seam();
  rm_.ctl = seam.open("/dev/nvidiactl", O_RDWR);
  if (rm_.ctl < 0)
    return std::unexpected(fmt::format(
        "{}: cannot open /dev/nvidiactl: {}; {}", name_, os::describe(rm_.ctl),
        rm_.ctl == -ENOENT ? "the NVIDIA kernel driver is not loaded (modprobe nvidia), or this machine has no NVIDIA GPU"
                           : "the user needs read and write access to the NVIDIA device files"));
  auto root = rm_.alloc(0, kRootClient, nullptr, 0, "making the client");
  if (!root) return std::unexpected(failed("opening", root.error()));
  rm_.root = *root;
  if (auto v = check_version(); !v) return v;

  rm_.uvm = seam.open("/dev/nvidia-uvm", O_RDWR);
  if (rm_.uvm >= 0) rm_.uvm_mm = seam.open("/dev/nvidia-uvm", O_RDWR);
  if (rm_.uvm < 0 || rm_.uvm_mm < 0)
    return std::unexpected(fmt::format("{}: cannot open /dev/nvidia-uvm: {}; load nvidia-uvm.ko (modprobe nvidia-uvm)",
                                       name_, os::describe(rm_.uvm < 0 ? rm_.uvm : rm_.uvm_mm)));
  UvmInitialize init{0, ~0u, 0};
  if (auto r = rm_.uvm_call(kUvmInitialize, &init, &init.rmStatus, "UVM_INITIALIZE"); !r)
    return std::unexpected(failed("opening UVM", r.error()));
  UvmMmInitialize mm{rm_.uvm, ~0u};
  if (auto r = rm_.uvm_call(kUvmMmInitialize, &mm, &mm.rmStatus, "UVM_MM_INITIALIZE", rm_.uvm_mm); !r)
    return std::unexpected(failed("opening UVM", r.error()));

  // The GPU: the index-th valid card.
  std::vector<CardInfo> cards(kMaxCards);
  if (auto r = rm_.escape(rm_.ctl, kEscCardInfo, cards.data(), cards.size() * sizeof(CardInfo), "CARD_INFO"); !r)
    return std::unexpected(failed("listing the GPUs", r.error()));
  int valid = 0;
  const CardInfo* card = nullptr;
  for (const CardInfo& c : cards)
    if (c.valid && valid++ == index_) card = &c;
  if (!card)
    return std::unexpected(fmt::format("{}: the NVIDIA kernel driver lists {} GPU{}, so there is no NV:{}", name_,
                                       valid, valid == 1 ? "" : "s", index_));
  vram_bytes_ = card->fb_size;
  bus_ = fmt::format("{:04x}:{:02x}:{:02x}.{:x}", card->domain, card->bus, card->slot, card->function);
  minor_ = card->minor_number;
  IdInfoV2Params id{};
  id.gpuId = card->gpu_id;
  if (auto r = rm_.control(rm_.root, kCtrlIdInfoV2, &id, sizeof id, "GPU_GET_ID_INFO_V2"); !r)
    return std::unexpected(failed("identifying the GPU", r.error()));

  const std::string dev_path = fmt::format("/dev/nvidia{}", minor_);
  rm_.dev = seam.open(dev_path.c_str(), O_RDWR);
  if (rm_.dev < 0) return std::unexpected(failed("opening " + dev_path, os::describe(rm_.dev)));
  std::int32_t ctl_fd = rm_.ctl;
  if (auto r = rm_.escape(rm_.dev, kEscRegisterFd, &ctl_fd, sizeof ctl_fd, "REGISTER_FD"); !r)
    return std::unexpected(failed("opening " + dev_path, r.error()));

  DeviceParams dp{};
  dp.deviceId = id.deviceInstance, dp.hClientShare = rm_.root;
  auto device = rm_.alloc(rm_.root, kDevice, &dp, sizeof dp, "making the device");
  if (!device) return std::unexpected(failed("opening", device.error()));
  device_ = *device;
  std::uint32_t sub_id = 0;
  auto subdevice = rm_.alloc(device_, kSubdevice, &sub_id, sizeof sub_id, "making the subdevice");
  if (!subdevice) return std::unexpected(failed("opening", subdevice.error()));
  subdevice_ = *subdevice;

  // The generation, by the compute class the GPU offers.
  ClassListParams cl{};
  if (auto r = rm_.control(device_, kCtrlClassList, &cl, sizeof cl, "GPU_GET_CLASSLIST"); !r)
    return std::unexpected(failed("listing the GPU's classes", r.error()));
  std::vector<std::uint32_t> classes(cl.numClasses);
  cl.classList = reinterpret_cast<std::uint64_t>(classes.data());
  if (auto r = rm_.control(device_, kCtrlClassList, &cl, sizeof cl, "GPU_GET_CLASSLIST"); !r)
    return std::unexpected(failed("listing the GPU's classes", r.error()));
  classes.resize(std::min<std::size_t>(classes.size(), cl.numClasses));
  auto offers = [&](std::uint32_t c) { return std::find(classes.begin(), classes.end(), c) != classes.end(); };
  for (const Generation* g : {&kHopper, &kAmpere})
    if (offers(g->compute) && offers(g->channel) && offers(g->copy) && offers(g->usermode)) {
      gen_ = g;
      break;
    }
  if (!gen_) {
    std::string compute;
    for (std::uint32_t c : classes)
      if ((c & 0xFF) == 0xC0) compute += fmt::format(" {:#x}", c);
    return std::unexpected(fmt::format(
        "{}: the GPU offers no class set rig's NVIDIA driver builds work for (Hopper: compute {:#x}, Ampere: compute "
        "{:#x}, each with its channel, copy and usermode classes); its compute classes:{}",
        name_, kHopper.compute, kAmpere.compute, compute.empty() ? " none" : compute));
  }

  // The doorbell.
  auto usermode = rm_.alloc(subdevice_, gen_->usermode, nullptr, 0, "making the usermode page");
  if (!usermode) return std::unexpected(failed("opening", usermode.error()));
  usermode_ = *usermode;
  auto page = map_cpu(subdevice_, usermode_, kUsermodeBytes, usermode_fd_, usermode_linear_);
  if (!page) return std::unexpected(failed("mapping the usermode page", page.error()));
  usermode_page_ = *page;

  // The VA space, owned by UVM.
  VaSpaceParams va{};
  va.flags = kVaPageFaulting | kVaExternallyOwned, va.vaBase = kVaBase, va.vaSize = kVaSize;
  auto vaspace = rm_.alloc(device_, kVaSpace, &va, sizeof va, "making the VA space");
  if (!vaspace) return std::unexpected(failed("opening", vaspace.error()));
  vaspace_ = *vaspace;
  GidParams gid{};
  gid.flags = kGidBinary;
  if (auto r = rm_.control(subdevice_, kCtrlGidInfo, &gid, sizeof gid, "GPU_GET_GID_INFO"); !r)
    return std::unexpected(failed("reading the GPU's UUID", r.error()));
  if (gid.length != sizeof uuid_)
    return std::unexpected(failed("reading the GPU's UUID", fmt::format("{} bytes, not 16", gid.length)));
  std::memcpy(uuid_, gid.data, sizeof uuid_);
  UvmRegisterGpu rg{};
  std::memcpy(rg.uuid, uuid_, sizeof uuid_);
  rg.rmCtrlFd = -1, rg.rmStatus = ~0u;
  if (auto r = rm_.uvm_call(kUvmRegisterGpu, &rg, &rg.rmStatus, "UVM_REGISTER_GPU"); !r)
    return std::unexpected(failed("registering the GPU with UVM", r.error()));
  UvmRegisterVaSpace rv{};
  std::memcpy(rv.uuid, uuid_, sizeof uuid_);
  rv.rmCtrlFd = rm_.ctl, rv.hClient = rm_.root, rv.hVaSpace = vaspace_, rv.rmStatus = ~0u;
  if (auto r = rm_.uvm_call(kUvmRegisterGpuVaSpace, &rv, &rv.rmStatus, "UVM_REGISTER_GPU_VASPACE"); !r)
    return std::unexpected(failed("registering the VA space with UVM", r.error()));

  if (auto r = make_channels(); !r) return r;
  open_ = true;
  return {};
}

Result<Block> Device::placed_sysmem(std::uint64_t bytes, std::string_view what) {
  auto memory = make_memory(kSysmem, bytes);
  if (!memory) return std::unexpected(failed(fmt::format("making {}", what), memory.error()));
  auto placed = place(*memory, bytes, true);
  if (!placed) {
    rm_.free(*memory);
    return std::unexpected(failed(fmt::format("mapping {}", what), placed.error()));
  }
  std::memset(placed->host, 0, bytes);
  return placed;
}

Result<void> Device::make_channels() {
  GroupParams g{};
  g.engineType = kEngineGraphics;
  auto group = rm_.alloc(device_, kChannelGroup, &g, sizeof g, "making the channel group");
  if (!group) return std::unexpected(failed("opening", group.error()));
  group_ = *group;
  auto ring = make_memory(kVidmem, kChannelMemoryBytes);
  if (!ring) return std::unexpected(failed("making the channels' rings", ring.error()));
  auto placed = place(*ring, kChannelMemoryBytes, true);
  if (!placed) {
    rm_.free(*ring);
    return std::unexpected(failed("mapping the channels' rings", placed.error()));
  }
  channel_memory_ = *placed;
  std::memset(channel_memory_.host, 0, kChannelMemoryBytes);
  for (int i = 0; i < 2; ++i) {
    auto notifier = make_memory(kSysmem, kPage);
    if (!notifier) return std::unexpected(failed("making an error notifier", notifier.error()));
    notifier_[i] = *notifier;
    auto page = map_cpu(device_, notifier_[i], kPage, notifier_fd_[i], notifier_linear_[i]);
    if (!page) return std::unexpected(failed("mapping an error notifier", page.error()));
    notifier_page_[i] = *page;
    std::memset(notifier_page_[i], 0, kPage);
  }
  ShareParams s{vaspace_, kSubcontextAsync, 0};
  auto share = rm_.alloc(group_, kContextShare, &s, sizeof s, "making the context share");
  if (!share) return std::unexpected(failed("opening", share.error()));
  share_ = *share;
  for (int i = 0; i < 2; ++i) {
    Channel& ch = i == 0 ? compute_ : copy_;
    ch.ring_address = channel_memory_.address + std::uint64_t(i) * kGpRingBytes;
    ch.userd_offset = kUserdAt + std::uint64_t(i) * kUserdBytes;
    ch.gp_ring = reinterpret_cast<std::uint32_t*>(channel_memory_.host + std::uint64_t(i) * kGpRingBytes);
    ch.userd = channel_memory_.host + ch.userd_offset;
    ch.engine_class = i == 0 ? gen_->compute : gen_->copy;
    ch.subchannel = i == 0 ? kComputeSubchannel : kCopySubchannel;
    auto push = make_memory(kSysmem, kPushBytes);
    if (!push) return std::unexpected(failed("making a push buffer", push.error()));
    auto pushed = place(*push, kPushBytes, true);
    if (!pushed) {
      rm_.free(*push);
      return std::unexpected(failed("mapping a push buffer", pushed.error()));
    }
    ch.push = *pushed;
    ChannelParams c{};
    c.hObjectError = notifier_[i];
    c.gpFifoOffset = ch.ring_address;
    c.gpFifoEntries = kGpEntries;
    c.hContextShare = share_;
    c.hUserdMemory[0] = channel_memory_.memory;
    c.userdOffset[0] = ch.userd_offset;
    c.engineType = i == 0 ? kEngineGraphics : kEngineCopy0;
    const char* what = i == 0 ? "making the compute channel" : "making the copy channel";
    auto h = rm_.alloc(group_, gen_->channel, &c, sizeof c, what);
    if (!h) return std::unexpected(failed("opening", h.error()));
    ch.handle = *h;
    auto engine = rm_.alloc(ch.handle, i == 0 ? gen_->compute : gen_->copy, nullptr, 0,
                            i == 0 ? "binding the compute engine" : "binding the copy engine");
    if (!engine) return std::unexpected(failed("opening", engine.error()));
    ch.engine = *engine;
    if (auto r = rm_.control(ch.handle, kCtrlWorkSubmitToken, &ch.token, sizeof ch.token,
                             "GPFIFO_GET_WORK_SUBMIT_TOKEN");
        !r)
      return std::unexpected(failed(i == 0 ? "the compute channel" : "the copy channel", r.error()));
    const std::uint64_t range = take_heap(kChannelRangeBytes);
    if (!range) return std::unexpected(failed("registering a channel with UVM", "the driver's part of the VA space is full"));
    UvmRegisterChannel rc{};
    std::memcpy(rc.uuid, uuid_, sizeof uuid_);
    rc.rmCtrlFd = rm_.ctl, rc.hClient = rm_.root, rc.hChannel = ch.handle, rc.base = range;
    rc.length = kChannelRangeBytes, rc.rmStatus = ~0u;
    if (auto r = rm_.uvm_call(kUvmRegisterChannel, &rc, &rc.rmStatus, "UVM_REGISTER_CHANNEL"); !r) {
      give_heap(range, kChannelRangeBytes);
      return std::unexpected(failed(i == 0 ? "registering the compute channel with UVM"
                                           : "registering the copy channel with UVM", r.error()));
    }
    ch.uvm_range = range;
  }
  auto control = placed_sysmem(kPage, "the sequence words");
  if (!control) return std::unexpected(control.error());
  control_ = *control;
  auto stamps = placed_sysmem(kStampsBytes, "the stamps' slots");
  if (!stamps) return std::unexpected(stamps.error());
  stamps_ = *stamps;
  if (auto r = correlate(); !r) return std::unexpected(failed("reading the GPU's timer", r.error()));
  if (auto r = map_windows(); !r) return r;
  if (auto r = make_events(); !r) return r;
  std::uint8_t enable[3] = {1, 0, 0};  // NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS: bEnable, bSkipSubmit, bSkipEnable
  if (auto r = rm_.control(group_, kCtrlSchedule, enable, sizeof enable, "GPFIFO_SCHEDULE"); !r)
    return std::unexpected(failed("scheduling the channel group", r.error()));
  return {};
}

Result<void> Device::map_windows() {
  // rig_words (every device's timeline word, which other devices' queues wait on) and, where
  // the caller gave a word of its own, that word's page: OS-descriptor memory at addresses of
  // the heap, below the semaphores' limit.
  auto window = [&](std::uintptr_t host, std::uint64_t bytes) -> Result<void> {
    Nvos02WithFd a{rm_.root, device_, 0, kOsDescriptor, kOsDescriptorFlags, 0, host, bytes - 1, ~0u, 0, -1, 0};
    auto r = rm_.escape(rm_.dev, kEscAllocMemory, &a, sizeof a, "RM_ALLOC_MEMORY");
    if (!r) return std::unexpected(failed("mapping the timeline words", r.error()));
    if (a.status != kOk)
      return std::unexpected(failed("mapping the timeline words",
                                    "RM_ALLOC_MEMORY: RM refused it with " + status_name(a.status)));
    auto b = place(a.hObjectNew, bytes, false);
    if (!b) {
      rm_.free(a.hObjectNew);
      return std::unexpected(failed("mapping the timeline words", b.error()));
    }
    window_blocks_.push_back(*b);
    windows_.push_back({host, bytes, b->address});
    return {};
  };
  const auto words = reinterpret_cast<std::uintptr_t>(&rig_words[0]) & ~(kPage - 1);
  const auto words_end = round_up(reinterpret_cast<std::uintptr_t>(&rig_words[RIG_WORDS]), kPage);
  if (auto r = window(words, words_end - words); !r) return r;
  const auto word = reinterpret_cast<std::uintptr_t>(word_);
  if (word < words || word + 8 > words_end)
    if (auto r = window(word & ~(kPage - 1), kPage); !r) return r;
  return {};
}

Result<void> Device::make_events() {
  event_fd_ = rm_.seam().open("/dev/nvidiactl", O_RDWR);
  if (event_fd_ < 0) return std::unexpected(failed("opening the OS events' file", os::describe(event_fd_)));
  OsEventParams e{rm_.root, device_, std::uint32_t(event_fd_), ~0u};
  auto r = rm_.escape(event_fd_, kEscAllocOsEvent, &e, sizeof e, "ALLOC_OS_EVENT");
  if (!r || e.status != kOk)
    return std::unexpected(failed("making the OS event", r ? "RM refused it with " + status_name(e.status) : r.error()));
  event_made_ = true;
  EventParams nonstall{rm_.root, subdevice_, kOsEvent, kNotifyGr0 | kNotifyNonstall, std::uint64_t(event_fd_)};
  if (auto h = rm_.alloc(subdevice_, kOsEvent, &nonstall, sizeof nonstall, "binding the non-stall interrupt"); !h)
    return std::unexpected(failed("opening", h.error()));
  EventParams rc{rm_.root, subdevice_, kOsEvent, kNotifyRcError, std::uint64_t(event_fd_)};
  auto h = rm_.alloc(subdevice_, kOsEvent, &rc, sizeof rc, "binding the RC-error event");
  if (!h) return std::unexpected(failed("opening", h.error()));
  rc_event_ = *h;
  NotificationParams n{kNotifyRcError, kNotifyRepeat, 0, 0, 0};
  if (auto c = rm_.control(subdevice_, kCtrlSetNotification, &n, sizeof n, "EVENT_SET_NOTIFICATION"); !c)
    return std::unexpected(failed("enabling RC-error events", c.error()));
  return {};
}

std::uint64_t Device::window_address(const volatile void* host) const {
  const auto h = reinterpret_cast<std::uintptr_t>(host);
  for (const Window& w : windows_)
    if (h >= w.host && h + 8 <= w.host + w.bytes) return w.address + (h - w.host);
  return 0;
}

edge::Facts Device::facts() {
  edge::Facts f;
  f.arch = gen_->arch;
  f.budget = vram_bytes_;
  f.queues = {{"COPY:0", {Kind::Copy, Kind::Fill}}, {"COMPUTE:0", {Kind::Words, Kind::Fill, Kind::Launch}}};
  f.copy_engine = 0;
  f.completion = edge::Completion::Store;
  f.waits = {true, true};
  f.hang_ms = options_.hang_ms;
  f.maps_host = true;
  f.host_addresses = false;
  f.alignment = kPage;
  f.word = word_;
  f.edge = &edge_;
  f.bus = bus_;
  f.capability = abi_capability();
  return f;
}

void Device::stop(std::string_view) {
  if (stopped_) return;
  stopped_ = true, open_ = false;
  // The channel group (its channels with it) before the memory their rings lie in. The
  // regions and the client stay until rig frees them (and the driver is destroyed).
  // UVM lets go of the channels before RM frees them.
  for (Channel* c : {&compute_, &copy_})
    if (c->uvm_range) {
      UvmUnregisterChannel u{};
      std::memcpy(u.uuid, uuid_, sizeof uuid_);
      u.hClient = rm_.root, u.hChannel = c->handle, u.rmStatus = ~0u;
      rm_.uvm_call(kUvmUnregisterChannel, &u, &u.rmStatus, "UVM_UNREGISTER_CHANNEL");
      give_heap(c->uvm_range, kChannelRangeBytes), c->uvm_range = 0;
    }
  if (group_) rm_.free(group_), group_ = 0;
  for (Block* b : {&channel_memory_, &compute_.push, &copy_.push, &control_, &stamps_})
    if (b->memory) drop(*b), *b = {};
  for (Block& b : window_blocks_) drop(b);
  window_blocks_.clear(), windows_.clear(), flights_.clear();
  for (Timed& t : timed_) t = {};  // the values' work is gone: no stamps to read
  if (usermode_page_) unmap_cpu(subdevice_, usermode_, usermode_page_, kUsermodeBytes, usermode_fd_, usermode_linear_);
  usermode_page_ = nullptr, usermode_fd_ = -1;
  for (int i = 0; i < 2; ++i) {
    if (notifier_page_[i]) unmap_cpu(device_, notifier_[i], notifier_page_[i], kPage, notifier_fd_[i], notifier_linear_[i]);
    notifier_page_[i] = nullptr, notifier_fd_[i] = -1;
  }
  if (event_fd_ >= 0) {
    if (event_made_) {
      OsEventParams e{rm_.root, device_, std::uint32_t(event_fd_), ~0u};
      rm_.escape(event_fd_, kEscFreeOsEvent, &e, sizeof e, "FREE_OS_EVENT");
    }
    rm_.seam().close(event_fd_), event_fd_ = -1, event_made_ = false;
  }
  // The channels are gone: the word shows the values they dropped, after which rig frees memory.
  if (submitted_ > __atomic_load_n(word_, __ATOMIC_ACQUIRE)) __atomic_store_n(word_, submitted_, __ATOMIC_RELEASE);
  bool none;
  {
    std::lock_guard lock(memory_lock_);
    none = blocks_.empty();
  }
  if (none) close();  // no region left to free: the client and the files go now
}

void Device::close() {
  stop("closed");
  os::Seam& seam = rm_.seam();
  {
    std::lock_guard lock(memory_lock_);
    for (auto& [id, b] : blocks_) drop(b);
    blocks_.clear();
    for (auto& [host, m] : host_maps_) drop(m.block);
    host_maps_.clear();
    drop_code();
  }
  // Freeing the client frees every object under it (RM_FREE takes the subtree).
  if (rm_.root) rm_.free(rm_.root), rm_.root = 0;
  for (int* fd : {&rm_.dev, &rm_.uvm_mm, &rm_.uvm, &rm_.ctl})
    if (*fd >= 0) seam.close(*fd), *fd = -1;
}

}  // namespace rig::nv::driver

namespace rig::nv {

edge::Opener<> opener(int index, os::Seam& seam, Options options) {
  return {fmt::format("NV:{}", index),
          [index, &seam, options](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
            auto d = std::make_unique<driver::Device>(seam, index, word, options);
            if (auto r = d->open(); !r) return std::unexpected(r.error());
            return d;
          }};
}

Result<std::vector<GpuInfo>> gpus(os::Seam& seam) {
  const int ctl = seam.open("/dev/nvidiactl", O_RDWR);
  if (ctl < 0) return std::unexpected(fmt::format("cannot open /dev/nvidiactl: {}", os::describe(ctl)));
  std::vector<driver::CardInfo> cards(driver::kMaxCards);
  const int r = seam.ioctl(ctl, driver::escape(driver::kEscCardInfo, cards.size() * sizeof cards[0]), cards.data());
  seam.close(ctl);
  if (r < 0) return std::unexpected(fmt::format("CARD_INFO on /dev/nvidiactl: the ioctl failed: {}", os::describe(r)));
  std::vector<GpuInfo> out;
  for (const auto& c : cards) {
    if (!c.valid) continue;
    out.push_back({int(out.size()), c.gpu_id, c.minor_number, c.fb_size, c.device_id,
                   fmt::format("{:04x}:{:02x}:{:02x}.{:x}", c.domain, c.bus, c.slot, c.function)});
  }
  return out;
}

Result<std::string> driver_version(os::Seam& seam) {
  driver::Rm rm(seam);
  rm.ctl = seam.open("/dev/nvidiactl", O_RDWR);
  if (rm.ctl < 0) return std::unexpected(fmt::format("cannot open /dev/nvidiactl: {}", os::describe(rm.ctl)));
  auto root = rm.alloc(0, driver::kRootClient, nullptr, 0, "making a client");
  if (root) rm.root = *root;
  auto version = driver::read_version(rm);
  if (rm.root) rm.free(rm.root);
  seam.close(rm.ctl);
  return version;
}

Result<Objects> objects_of(edge::Driver& driver) {
  auto device = driver::open_device(driver);
  if (!device) return std::unexpected(device.error());
  return (*device)->objects();
}

}  // namespace rig::nv
