// RM's half of the simulated NVIDIA GPU (sim.hpp): the object tree, RM_ALLOC by class,
// RM_FREE of subtrees, RM_CONTROL by command, memory objects and their CPU mapping contexts,
// and OS events. Status codes and the checks that give them follow OGKM 580.142's
// resource server (rs_server.c, rs_resource.c, alloc_free.c, param_copy.c) and escape.c.
#include "state.hpp"
#include "../dmabuf.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

namespace rig::sim::nv {
namespace {

using namespace abi;

bool is_memory(std::uint32_t klass) {
  return klass == NV01_MEMORY_LOCAL_USER || klass == NV01_MEMORY_SYSTEM || klass == NV01_MEMORY_SYSTEM_OS_DESCRIPTOR;
}

Object make_object(std::uint32_t h, std::uint32_t parent, std::uint32_t klass) {
  Object o;
  o.handle = h, o.parent = parent, o.klass = klass;
  return o;
}

template <class T>
T* params_of(std::uint64_t p) {
  return reinterpret_cast<T*>(p);
}

// The size of the parameter struct RM reads for an allocation of `klass` (by class, as
// rmapiParamsCopyInit looks it up), 0 for none.
std::size_t alloc_params_size(std::uint32_t klass, const Classes& cls) {
  switch (klass) {
    case NV01_DEVICE_0: return sizeof(NV0080_ALLOC_PARAMETERS);
    case NV20_SUBDEVICE_0: return sizeof(NV2080_ALLOC_PARAMETERS);
    case NV01_MEMORY_LOCAL_USER:
    case NV01_MEMORY_SYSTEM: return sizeof(NV_MEMORY_ALLOCATION_PARAMS);
    case NV01_MEMORY_VIRTUAL: return sizeof(NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS);
    case FERMI_VASPACE_A: return sizeof(NV_VASPACE_ALLOCATION_PARAMETERS);
    case KEPLER_CHANNEL_GROUP_A: return sizeof(NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS);
    case FERMI_CONTEXT_SHARE_A: return sizeof(NV_CTXSHARE_ALLOCATION_PARAMETERS);
    case GT200_DEBUGGER: return sizeof(NV83DE_ALLOC_PARAMETERS);
    case NV01_EVENT_OS_EVENT: return sizeof(NV0005_ALLOC_PARAMETERS);
  }
  if (klass == cls.channel) return sizeof(NV_CHANNEL_ALLOC_PARAMS);
  if (klass == cls.usermode && cls.usermode == kHopper.usermode) return sizeof(NV_HOPPER_USERMODE_A_PARAMS);
  return 0;
}

}  // namespace

// ---- Allocation.

std::uint32_t Simulator::Impl::alloc(int fd, std::uint32_t h_client, std::uint32_t h_parent, std::uint32_t& h_new,
                                     std::uint32_t klass, std::uint64_t params) {
  const Classes& cls = config.classes;
  const std::string what = fmt::format("RM_ALLOC class {:#x} under {:#x}", klass, h_parent);
  if (klass == NV01_ROOT_CLIENT) {
    if (files.at(fd).node != Node::ctl) return refuse(NV_ERR_INVALID_ARGUMENT, what + ": a client is made on /dev/nvidiactl");
    std::uint32_t h = h_new ? h_new : next_client++;
    if (clients.contains(h)) return refuse(NV_ERR_INSERT_DUPLICATE_NAME, fmt::format("{}: client {:#x} exists", what, h));
    Client& c = clients[h];
    c.handle = h, c.ctl_fd = fd;
    c.objects[h] = make_object(h, 0, NV01_ROOT_CLIENT);
    h_new = h;
    return NV_OK;
  }
  Client* c = client(h_client);
  if (!c) return refuse(NV_ERR_INVALID_CLIENT, fmt::format("{}: no client {:#x}", what, h_client));
  // The class must be one this GPU has (GH100 has only Hopper's engine classes), and its
  // parent of the kind the class lives under.
  std::uint32_t want_parent = 0;  // a class, or 0 for "a client"
  switch (klass) {
    case NV01_DEVICE_0: want_parent = NV01_ROOT_CLIENT; break;
    case NV20_SUBDEVICE_0: want_parent = NV01_DEVICE_0; break;
    case NV01_MEMORY_LOCAL_USER:
    case NV01_MEMORY_SYSTEM:
    case NV01_MEMORY_VIRTUAL:
    case FERMI_VASPACE_A:
    case KEPLER_CHANNEL_GROUP_A:
    case GT200_DEBUGGER: want_parent = NV01_DEVICE_0; break;
    case FERMI_CONTEXT_SHARE_A: want_parent = KEPLER_CHANNEL_GROUP_A; break;
    case NV01_EVENT_OS_EVENT: want_parent = NV20_SUBDEVICE_0; break;
    case NV01_MEMORY_SYSTEM_OS_DESCRIPTOR:
      return refuse(NV_ERR_NOT_SUPPORTED, what + ": the simulator makes OS descriptors through RM_ALLOC_MEMORY only");
    default:
      if (klass == cls.usermode) want_parent = NV20_SUBDEVICE_0;
      else if (klass == cls.channel) want_parent = KEPLER_CHANNEL_GROUP_A;
      else if (klass == cls.compute || klass == cls.copy) want_parent = cls.channel;
      else return refuse(NV_ERR_INVALID_CLASS, fmt::format("{}: the GPU has no class {:#x}", what, klass));
  }
  if (config.gvisor && klass == NV01_MEMORY_VIRTUAL)
    return refuse(NV_ERR_INVALID_CLASS, what + ": nvproxy allows NV01_MEMORY_VIRTUAL only with graphics or video "
                                               "capabilities");
  auto parent_it = c->objects.find(h_parent);
  if (parent_it == c->objects.end())
    return refuse(NV_ERR_INVALID_OBJECT_PARENT, fmt::format("{}: client {:#x} has no object {:#x}", what, h_client,
                                                            h_parent));
  Object& parent = parent_it->second;
  if (parent.klass != want_parent)
    return refuse(NV_ERR_INVALID_OBJECT_PARENT, fmt::format("{}: the parent is a {:#x}, a {:#x} lives under a {:#x}",
                                                            what, parent.klass, klass, want_parent));
  std::uint32_t h = h_new ? h_new : next_handle++;
  if (c->objects.contains(h))
    return refuse(NV_ERR_INSERT_DUPLICATE_NAME, fmt::format("{}: handle {:#x} is taken in client {:#x}", what, h,
                                                            h_client));
  // RM reads the class's own parameter struct (its size by class, whatever paramsSize says);
  // classes that take parameters need them.
  const bool optional_params = klass == cls.usermode || klass == cls.compute || klass == cls.copy;
  if (!params && !optional_params) return refuse(NV_ERR_INVALID_ARGUMENT, what + ": no parameters");
  // RM works on its own copy of the parameters, copied back at the end.
  alignas(8) std::array<std::byte, 512> copy{};
  const std::size_t params_size = alloc_params_size(klass, cls);
  const std::uint64_t user_params = params;
  if (params && params_size) {
    if (!copy_from_user(params, copy.data(), params_size))
      return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: its {} bytes of parameters at {:#x} are not readable",
                                                        what, params_size, params));
    params = reinterpret_cast<std::uint64_t>(copy.data());
  }
  Object o = make_object(h, h_parent, klass);

  if (klass == NV01_DEVICE_0) {
    auto* p = params_of<NV0080_ALLOC_PARAMETERS>(params);
    if (p->deviceId != 0) return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: no device {}", what, p->deviceId));
    for (auto& [oh, other] : c->objects)
      if (other.klass == NV01_DEVICE_0)
        return refuse(NV_ERR_STATE_IN_USE, fmt::format("{}: client {:#x} already has device 0 as {:#x}", what,
                                                       h_client, oh));
  } else if (klass == NV20_SUBDEVICE_0) {
    auto* p = params_of<NV2080_ALLOC_PARAMETERS>(params);
    if (p->subDeviceId != 0)
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: no subdevice {}", what, p->subDeviceId));
  } else if (klass == cls.usermode) {
    o.memory = make_backing(kUsermodeBytes, "rig-nv-usermode");
    if (!o.memory) return refuse(NV_ERR_NO_MEMORY, what + ": no host memory for the usermode page");
  } else if (klass == NV01_MEMORY_LOCAL_USER || klass == NV01_MEMORY_SYSTEM) {
    auto* p = params_of<NV_MEMORY_ALLOCATION_PARAMS>(params);
    if (p->size == 0) return refuse(NV_ERR_INVALID_ARGUMENT, what + ": size 0");
    std::uint64_t align = std::max<std::uint64_t>(p->alignment, kPage);
    if (align & (align - 1)) return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: alignment {:#x} is not a power "
                                                                                "of two", what, p->alignment));
    const std::uint64_t size = (p->size + align - 1) & ~(align - 1);
    if (klass == NV01_MEMORY_LOCAL_USER) {
      if (size > config.vram_bytes - std::min(config.vram_bytes, vram_used.load()))
        return refuse(NV_ERR_NO_MEMORY, fmt::format("{}: {:#x} bytes of video memory asked, {:#x} of {:#x} free", what,
                                                    size, config.vram_bytes - vram_used.load(), config.vram_bytes));
    }
    o.memory = make_backing(size, klass == NV01_MEMORY_LOCAL_USER ? "rig-nv-vidmem" : "rig-nv-sysmem");
    if (!o.memory) return refuse(NV_ERR_NO_MEMORY, fmt::format("{}: no host memory for {:#x} bytes", what, size));
    if (klass == NV01_MEMORY_LOCAL_USER) vram_used += size, o.memory->vram_used = &vram_used;
    p->size = size;
    p->offset = 0;  // where it lies: the simulator has no physical addresses to give
    p->limit = size - 1;
  } else if (klass == NV01_MEMORY_VIRTUAL) {
    auto* p = params_of<NV_MEMORY_VIRTUAL_ALLOCATION_PARAMS>(params);
    if (p->hVASpace) {
      Object* va = object(h_client, p->hVASpace);
      if (!va || va->klass != FERMI_VASPACE_A)
        return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: hVASpace {:#x} is no FERMI_VASPACE_A", what,
                                                                p->hVASpace));
    }
  } else if (klass == FERMI_VASPACE_A) {
    auto* p = params_of<NV_VASPACE_ALLOCATION_PARAMETERS>(params);
    if (p->index != 0) return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: index {} (only 0 is made)", what, p->index));
    if (p->vaBase % kPage || p->vaSize % kPage)
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: vaBase {:#x} or vaSize {:#x} not page-aligned", what,
                                                         p->vaBase, p->vaSize));
    o.va = std::make_shared<VaSpace>();
    o.va->base = p->vaBase;
    o.va->limit = p->vaSize ? p->vaBase + p->vaSize : (1ull << 49);
    o.va_flags = p->flags;
  } else if (klass == KEPLER_CHANNEL_GROUP_A) {
    auto* p = params_of<NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS>(params);
    if (p->engineType != NV2080_ENGINE_TYPE_GRAPHICS &&
        (p->engineType < NV2080_ENGINE_TYPE_COPY0 || p->engineType > NV2080_ENGINE_TYPE_COPY9))
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: engineType {} is neither GRAPHICS nor a COPY engine",
                                                         what, p->engineType));
    if (p->hVASpace) {
      Object* va = object(h_client, p->hVASpace);
      if (!va || va->klass != FERMI_VASPACE_A)
        return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: hVASpace {:#x} is no FERMI_VASPACE_A", what,
                                                                p->hVASpace));
      o.ctx_vaspace = p->hVASpace;
    }
    o.engine_type = p->engineType;
  } else if (klass == FERMI_CONTEXT_SHARE_A) {
    auto* p = params_of<NV_CTXSHARE_ALLOCATION_PARAMETERS>(params);
    std::uint32_t hva = p->hVASpace ? p->hVASpace : parent.ctx_vaspace;
    Object* va = object(h_client, hva);
    if (!va || va->klass != FERMI_VASPACE_A)
      return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: hVASpace {:#x} is no FERMI_VASPACE_A", what, hva));
    o.ctx_vaspace = hva;
    std::uint32_t ids = 0;
    for (std::uint32_t ch : parent.children) ids += c->objects.at(ch).klass == FERMI_CONTEXT_SHARE_A;
    p->subctxId = ids;
  } else if (klass == cls.channel) {
    auto* p = params_of<NV_CHANNEL_ALLOC_PARAMS>(params);
    std::uint32_t in_group = 0;
    for (std::uint32_t ch : parent.children) in_group += bool(c->objects.at(ch).channel);
    if (in_group == kMaxChannelsPerGroup)
      return refuse(NV_ERR_INSUFFICIENT_RESOURCES, fmt::format("{}: group {:#x} already has its {} channels", what,
                                                               h_parent, kMaxChannelsPerGroup));
    auto ch = std::make_shared<Channel>();
    ch->client = h_client, ch->handle = h, ch->tsg = h_parent, ch->channel_class = klass;
    if (p->engineType == NV2080_ENGINE_TYPE_GRAPHICS) ch->kind = Engine_kind::compute;
    else if (p->engineType >= NV2080_ENGINE_TYPE_COPY0 && p->engineType <= NV2080_ENGINE_TYPE_COPY9)
      ch->kind = Engine_kind::copy;
    else
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: engineType {} is neither GRAPHICS nor a COPY engine",
                                                         what, p->engineType));
    if (p->gpFifoEntries == 0 || (p->gpFifoEntries & (p->gpFifoEntries - 1)))
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: gpFifoEntries {} is not a power of two", what,
                                                         p->gpFifoEntries));
    if (p->gpFifoOffset % 8)
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: gpFifoOffset {:#x} is not 8-byte aligned", what,
                                                         p->gpFifoOffset));
    // The VA space: the context share's, else the channel's own hVASpace, else its group's.
    std::uint32_t hva = 0;
    if (p->hContextShare) {
      Object* share = object(h_client, p->hContextShare);
      if (!share || share->klass != FERMI_CONTEXT_SHARE_A || share->parent != h_parent)
        return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: hContextShare {:#x} is no context share of "
                                                                "group {:#x}", what, p->hContextShare, h_parent));
      hva = share->ctx_vaspace;
    } else {
      hva = p->hVASpace ? p->hVASpace : parent.ctx_vaspace;
    }
    Object* va = object(h_client, hva);
    if (!va || va->klass != FERMI_VASPACE_A)
      return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: the channel has no VA space (hVASpace {:#x})",
                                                              what, hva));
    ch->space = va->va;
    Object* userd = object(h_client, p->hUserdMemory[0]);
    if (!userd || !userd->memory || !is_memory(userd->klass))
      return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: hUserdMemory[0] {:#x} is no memory", what,
                                                              p->hUserdMemory[0]));
    if (p->userdOffset[0] % kUserdBytes || p->userdOffset[0] + kUserdBytes > userd->memory->size)
      return refuse(NV_ERR_INVALID_OFFSET, fmt::format("{}: userdOffset[0] {:#x} is not a 512-byte USERD inside "
                                                       "{:#x} bytes", what, p->userdOffset[0], userd->memory->size));
    ch->userd = userd->memory, ch->userd_offset = p->userdOffset[0];
    if (p->hObjectError) {
      Object* err = object(h_client, p->hObjectError);
      if (!err || !err->memory || !is_memory(err->klass))
        return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: hObjectError {:#x} is no memory", what,
                                                                p->hObjectError));
      if (err->memory->size < 16)
        return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: hObjectError {:#x} holds no 16-byte notifier", what,
                                                           p->hObjectError));
      ch->error_notifier = err->memory;
    }
    ch->gpfifo_va = p->gpFifoOffset, ch->gpfifo_entries = p->gpFifoEntries;
    ch->token = next_token++;
    o.channel = ch;
  } else if (klass == cls.compute || klass == cls.copy) {
    Channel& ch = *parent.channel;
    const Engine_kind want = klass == cls.compute ? Engine_kind::compute : Engine_kind::copy;
    if (ch.kind != want)
      return refuse(NV_ERR_INVALID_OBJECT_PARENT, fmt::format("{}: a {} object on a {} channel", what,
                                                              want == Engine_kind::compute ? "compute" : "copy",
                                                              ch.kind == Engine_kind::compute ? "GRAPHICS" : "COPY"));
    ch.classes.insert(klass);
    if (ch.box) ch.box->engine->allow(klass);
  } else if (klass == GT200_DEBUGGER) {
    auto* p = params_of<NV83DE_ALLOC_PARAMETERS>(params);
    if (!client(p->hAppClient))
      return refuse(NV_ERR_INVALID_CLIENT, fmt::format("{}: hAppClient {:#x} is no client", what, p->hAppClient));
    if (p->hClass3dObject && !object(p->hAppClient, p->hClass3dObject))
      return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: hClass3dObject {:#x} is no object of client {:#x}",
                                                              what, p->hClass3dObject, p->hAppClient));
  } else if (klass == NV01_EVENT_OS_EVENT) {
    auto* p = params_of<NV0005_ALLOC_PARAMETERS>(params);
    if (p->hClass != NV01_EVENT_OS_EVENT)
      return refuse(NV_ERR_INVALID_CLASS, fmt::format("{}: hClass {:#x} in the parameters", what, p->hClass));
    if (p->hParentClient != h_client || p->hSrcResource != h_parent)
      return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: hParentClient {:#x} / hSrcResource {:#x} are not "
                                                              "the client and the parent", what, p->hParentClient,
                                                              p->hSrcResource));
    const std::uint32_t index = p->notifyIndex & ~kEventFlagsMask;
    if (index >= NV2080_NOTIFIERS_MAXCOUNT)
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: notifyIndex {} beyond {}", what, index,
                                                         NV2080_NOTIFIERS_MAXCOUNT));
    const int efd = int(p->data);
    auto ef = files.find(efd);
    const bool allocated = ef != files.end() &&
                           std::ranges::any_of(ef->second.os_events, [&](auto& e) { return e.first == h_client; });
    if (!allocated)
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: data {} is no file with an OS event of client {:#x} "
                                                         "(ALLOC_OS_EVENT)", what, efd, h_client));
    o.event_fd = efd, o.notify_index = p->notifyIndex;
  }
  if (user_params && params_size && !copy_to_user(user_params, copy.data(), params_size))
    return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: its parameters at {:#x} are not writable", what,
                                                      user_params));
  parent.children.push_back(h);
  c->objects.emplace(h, std::move(o));
  h_new = h;
  return NV_OK;
}

// ---- Free.

void Simulator::Impl::free_tree(Client& c, std::uint32_t h) {
  auto it = c.objects.find(h);
  if (it == c.objects.end()) return;
  const std::vector<std::uint32_t> children = it->second.children;
  for (auto ch = children.rbegin(); ch != children.rend(); ++ch) free_tree(c, *ch);
  it = c.objects.find(h);
  Object& o = it->second;
  if (o.channel) {
    uvm_forget_channel(c.handle, h);
    if (o.channel->box) dying.push_back(std::move(o.channel->box));  // destroyed after the lock
  }
  if (o.memory && is_memory(o.klass)) drop_contexts(o.memory.get());
  if (o.memory && o.klass == config.classes.usermode) drop_contexts(o.memory.get());
  if (o.parent) {
    auto p = c.objects.find(o.parent);
    if (p != c.objects.end()) std::erase(p->second.children, h);
  }
  c.objects.erase(it);
}

void Simulator::Impl::free_client(std::uint32_t h) {
  auto it = clients.find(h);
  if (it == clients.end()) return;
  free_tree(it->second, h);
  clients.erase(h);
}

std::uint32_t Simulator::Impl::free(std::uint32_t h_client, std::uint32_t h_object) {
  const std::string what = fmt::format("RM_FREE {:#x} of client {:#x}", h_object, h_client);
  Client* c = client(h_client);
  if (!c) return refuse(NV_ERR_INVALID_CLIENT, what + ": no such client");
  if (!c->objects.contains(h_object)) return refuse(NV_ERR_INVALID_OBJECT_HANDLE, what + ": no such object");
  if (h_object == h_client) free_client(h_client);
  else free_tree(*c, h_object);
  return NV_OK;
}

// ---- Memory: OS descriptors and CPU mappings.

std::uint32_t Simulator::Impl::alloc_memory(int fd, NVOS02_with_fd& a) {
  NVOS02& p = a.params;
  const std::string what = fmt::format("RM_ALLOC_MEMORY class {:#x} under {:#x}", p.hClass, p.hObjectParent);
  if (p.hClass != NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
    return refuse(NV_ERR_NOT_SUPPORTED, what + ": the simulator allocates only OS descriptors (0x71) here");
  Client* c = client(p.hRoot);
  if (!c) return refuse(NV_ERR_INVALID_CLIENT, fmt::format("{}: no client {:#x}", what, p.hRoot));
  Object* parent = object(p.hRoot, p.hObjectParent);
  if (!parent || parent->klass != NV01_DEVICE_0)
    return refuse(NV_ERR_INVALID_OBJECT_PARENT, what + ": the parent is no device");
  std::uint32_t h = p.hObjectNew ? p.hObjectNew : next_handle++;
  if (c->objects.contains(h)) return refuse(NV_ERR_INSERT_DUPLICATE_NAME, fmt::format("{}: handle {:#x} is taken", what, h));
  const std::uint64_t size = p.limit + 1;
  if (!p.pMemory || p.pMemory % kPage || size % kPage || size == 0)
    return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: pMemory {:#x} and limit {:#x} are not whole pages", what,
                                                       p.pMemory, p.limit));
  // The pages must be the caller's (msync fails on addresses not mapped).
  if (msync(reinterpret_cast<void*>(p.pMemory), size, MS_ASYNC) != 0)
    return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: [{:#x}, +{:#x}) is not mapped in the process", what,
                                                      p.pMemory, size));
  (void)fd;
  Object o = make_object(h, p.hObjectParent, p.hClass);
  o.memory = std::make_shared<Backing>();
  o.memory->view = reinterpret_cast<std::byte*>(p.pMemory);
  o.memory->size = size;
  parent->children.push_back(h);
  c->objects.emplace(h, std::move(o));
  p.hObjectNew = h;
  return NV_OK;
}

std::uint32_t Simulator::Impl::map_memory(NVOS33_with_fd& a) {
  NVOS33& p = a.params;
  const std::string what = fmt::format("RM_MAP_MEMORY of {:#x}", p.hMemory);
  Client* c = client(p.hClient);
  if (!c) return refuse(NV_ERR_INVALID_CLIENT, fmt::format("{}: no client {:#x}", what, p.hClient));
  Object* dev = object(p.hClient, p.hDevice);
  if (!dev || (dev->klass != NV01_DEVICE_0 && dev->klass != NV20_SUBDEVICE_0))
    return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: hDevice {:#x} is no device or subdevice", what,
                                                            p.hDevice));
  Object* mem = object(p.hClient, p.hMemory);
  if (!mem) return refuse(NV_ERR_OBJECT_NOT_FOUND, what + ": no such object");
  if (!mem->memory || mem->klass == NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
    return refuse(NV_ERR_NOT_SUPPORTED, fmt::format("{}: a {:#x} is not mapped for the CPU by RM", what, mem->klass));
  if (p.length == 0 || p.offset >= mem->memory->size || p.length > mem->memory->size - p.offset)
    return refuse(NV_ERR_INVALID_LIMIT, fmt::format("{}: [{:#x}, +{:#x}) is not inside its {:#x} bytes", what,
                                                    p.offset, p.length, mem->memory->size));
  if (p.offset % kPage)
    return refuse(NV_ERR_INVALID_OFFSET, fmt::format("{}: offset {:#x} is not page-aligned", what, p.offset));
  auto f = files.find(a.fd);
  if (f == files.end() || f->second.node != Node::dev || f->second.registered_ctl < 0)
    return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: fd {} is no /dev/nvidia{} file registered with "
                                                       "REGISTER_FD", what, a.fd, config.minor));
  File& file = f->second;
  if (file.context_used)
    return refuse(NV_ERR_STATE_IN_USE, fmt::format("{}: fd {} already backs a mapping (one per file)", what, a.fd));
  file.context_used = file.context_live = true;
  file.ctx_client = p.hClient, file.ctx_memory = p.hMemory;
  file.ctx_offset = p.offset, file.ctx_length = p.length;
  file.ctx_backing = mem->memory;
  file.ctx_cookie = next_cookie;
  next_cookie += (p.length + kPage - 1) & ~(kPage - 1);
  p.pLinearAddress = file.ctx_cookie;
  return NV_OK;
}

// EXPORT_TO_DMABUF_FD with the checks, order and statuses of OGKM 580.142's nv-dmabuf.c
// (nv_dma_buf_export, nv_dma_buf_create, nv_dma_buf_dup_mem_handles) and osapi.c
// (RmDmabufGetClientAndDevice, RmDmabufVerifyMemHandle) for a PCIe GPU with memory of its own:
// only video memory is exported, FORCE_PCIE (coherent systems only) and mmap (GPUs without
// memory of their own only) are not supported. The simulator's own limit: a dma-buf is one
// whole memory object made in one call (its memfd, see ../dmabuf.hpp, which unlike the
// module's dma-buf of video memory the caller may mmap).
std::uint32_t Simulator::Impl::export_dmabuf(nv_ioctl_export_to_dma_buf_fd& p) {
  const std::string what = fmt::format("EXPORT_TO_DMABUF_FD under client {:#x}", p.hClient);
  if (p.totalSize == 0 || p.numObjects == 0 || p.totalObjects == 0 || p.numObjects > NV_DMABUF_EXPORT_MAX_HANDLES ||
      p.numObjects > p.totalObjects)
    return refuse(NV_ERR_INVALID_ARGUMENT,
                  fmt::format("{}: {} objects of {} in {} bytes (none, over {}, or over the dma-buf's objects)", what,
                              p.numObjects, p.totalObjects, p.totalSize, NV_DMABUF_EXPORT_MAX_HANDLES));
  if (p.mappingType != NV_DMABUF_EXPORT_MAPPING_TYPE_DEFAULT && p.mappingType != NV_DMABUF_EXPORT_MAPPING_TYPE_FORCE_PCIE)
    return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: mapping type {} is neither DEFAULT nor FORCE_PCIE", what,
                                                       p.mappingType));
  if (p.fd < -1)
    return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: fd {} is neither -1 (a new dma-buf) nor a dma-buf", what,
                                                       p.fd));
  if (p.fd >= 0)
    return refuse(NV_ERR_NOT_SUPPORTED, fmt::format("{}: fd {}: the simulator makes a dma-buf in one call and adds "
                                                    "nothing to one", what, p.fd));
  if (p.index > p.totalObjects - p.numObjects)
    return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: objects {} to {} are past the dma-buf's {}", what, p.index,
                                                       p.index + p.numObjects - 1, p.totalObjects));
  if (p.mappingType == NV_DMABUF_EXPORT_MAPPING_TYPE_FORCE_PCIE)
    return refuse(NV_ERR_NOT_SUPPORTED, what + ": FORCE_PCIE needs a CPU-coherent GPU, and this one is on PCIe");
  std::uint64_t attached = 0;
  std::shared_ptr<Backing> whole;
  for (std::uint32_t i = 0; i < p.numObjects; ++i) {
    const std::string piece = fmt::format("{}: object {} ({:#x}, [{:#x}, +{:#x}))", what, i, p.handles[i],
                                          p.offsets[i], p.sizes[i]);
    if (p.sizes[i] > p.totalSize - attached)
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: past the dma-buf's {} bytes", piece, p.totalSize));
    if (!client(p.hClient)) return refuse(NV_ERR_INVALID_CLIENT, fmt::format("{}: no client {:#x}", piece, p.hClient));
    Object* o = object(p.hClient, p.handles[i]);
    if (!o) return refuse(NV_ERR_OBJECT_NOT_FOUND, piece + ": no such object");
    const std::uint32_t k = o->klass;
    const bool video = k == NV01_MEMORY_LOCAL_USER || k == NV01_MEMORY_LOCAL_PRIVILEGED;
    if (!video && k != NV01_MEMORY_SYSTEM && k != NV01_MEMORY_VIRTUAL && k != NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
      return refuse(NV_ERR_INVALID_OBJECT, fmt::format("{}: a {:#x} is no memory", piece, k));
    if (p.offsets[i] % kPage || p.sizes[i] % kPage)
      return refuse(NV_ERR_INVALID_ARGUMENT, piece + ": its offset and size must be whole pages");
    if (!video)
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: a {:#x} is not video memory, and a GPU with memory of "
                                                         "its own exports only that", piece, k));
    const std::uint64_t size = o->memory->size;
    if (p.sizes[i] == 0 || p.sizes[i] > size || p.offsets[i] > size - p.sizes[i])
      return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: not inside its {:#x} bytes", piece, size));
    attached += p.sizes[i];
    if (p.offsets[i] == 0 && p.sizes[i] == size) whole = o->memory;
  }
  if (p.numObjects == p.totalObjects && attached != p.totalSize)
    return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: its objects hold {:#x} bytes, not the dma-buf's {:#x}", what,
                                                       attached, p.totalSize));
  if (p.bAllowMmap)
    return refuse(NV_ERR_NOT_SUPPORTED, what + ": mmap of a dma-buf is only for GPUs without memory of their own");
  if (p.numObjects != 1 || p.totalObjects != 1 || !whole)
    return refuse(NV_ERR_NOT_SUPPORTED, what + ": the simulator exports one whole memory object, not pieces");
  const int fd = dmabuf_of_memfd(whole->memfd, true);
  if (fd < 0) return refuse(NV_ERR_OPERATING_SYSTEM, fmt::format("{}: no descriptor: {}", what, std::strerror(-fd)));
  p.fd = fd;
  ++dmabuf_exports;
  return NV_OK;
}

std::uint32_t Simulator::Impl::unmap_memory(NVOS34& p) {
  const std::string what = fmt::format("RM_UNMAP_MEMORY of {:#x} at {:#x}", p.hMemory, p.pLinearAddress);
  if (!client(p.hClient)) return refuse(NV_ERR_INVALID_CLIENT, fmt::format("{}: no client {:#x}", what, p.hClient));
  if (!object(p.hClient, p.hMemory)) return refuse(NV_ERR_OBJECT_NOT_FOUND, what + ": no such object");
  for (auto& [fd, f] : files)
    if (f.context_live && f.ctx_client == p.hClient && f.ctx_memory == p.hMemory && f.ctx_cookie == p.pLinearAddress) {
      f.context_live = false;
      f.ctx_backing.reset();
      return NV_OK;
    }
  return refuse(NV_ERR_INVALID_ARGUMENT, what + ": no such mapping");
}

void Simulator::Impl::drop_contexts(const Backing* b) {
  for (auto& [fd, f] : files)
    if (f.context_live && f.ctx_backing.get() == b) f.context_live = false, f.ctx_backing.reset();
}

void Simulator::Impl::close_file(int fd, File& file) {
  if (file.node == Node::ctl) {
    std::vector<std::uint32_t> mine;
    for (auto& [h, c] : clients)
      if (c.ctl_fd == fd) mine.push_back(h);
    for (std::uint32_t h : mine) free_client(h);
  }
  if (file.node == Node::uvm) {  // UVM unmaps what the file mapped
    auto u = uvm.find(fd);
    if (u != uvm.end() && u->second.space) {
      std::vector<std::shared_ptr<Backing>> gone;
      for (auto& [base, r] : u->second.ranges)
        if (r.external) u->second.space->erase(base, r.length, gone);
      retire(u->second.space, std::move(gone));
    }
    uvm.erase(fd);
  }
  file.context_live = false;
  file.ctx_backing.reset();
  // Events that made this file readable have nowhere to go.
  for (auto& [h, c] : clients)
    for (auto& [oh, o] : c.objects)
      if (o.event_fd == fd) o.event_fd = -1;
}

// ---- OS events.

std::uint32_t Simulator::Impl::os_event(int fd, File& file, nv_ioctl_os_event& p, bool allocate) {
  const std::string what = fmt::format("{}_OS_EVENT on file {}", allocate ? "ALLOC" : "FREE", fd);
  if (!client(p.hClient)) return refuse(NV_ERR_INVALID_CLIENT, fmt::format("{}: no client {:#x}", what, p.hClient));
  if (int(p.fd) != fd)
    return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: fd {} is not the file it is issued on", what, p.fd));
  const std::pair key{p.hClient, p.hDevice};
  auto it = std::ranges::find(file.os_events, key);
  if (allocate) {
    if (it != file.os_events.end()) return refuse(NV_ERR_INVALID_ARGUMENT, what + ": already allocated");
    file.os_events.push_back(key);
    return NV_OK;
  }
  if (it == file.os_events.end()) return refuse(NV_ERR_INVALID_ARGUMENT, what + ": none allocated");
  file.os_events.erase(it);
  return NV_OK;
}

std::uint32_t Simulator::Impl::event_data(File& file, NVOS41& p) {
  if (!p.pEvent) return refuse(NV_ERR_INVALID_ARGUMENT, "RM_GET_EVENT_DATA: no pEvent");
  if (file.pending.empty()) {
    p.MoreEvents = 0;
    return NV_ERR_GENERIC;  // nothing fired: RM's answer, not a misuse (not logged)
  }
  struct NvUnixEvent {
    std::uint32_t hObject, NotifyIndex, info32;
    std::uint16_t info16, pad;
  };
  static_assert(sizeof(NvUnixEvent) == 16);  // nvos.h NvUnixEvent
  const File::Pending e = file.pending.front();
  file.pending.pop_front();
  const NvUnixEvent out{e.object, e.notify_index, e.info32, e.info16, 0};
  if (!copy_to_user(p.pEvent, &out, sizeof out)) {
    file.pending.push_front(e);
    return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("RM_GET_EVENT_DATA: pEvent {:#x} is not writable", p.pEvent));
  }
  p.MoreEvents = file.pending.empty() ? 0 : 1;
  return NV_OK;
}

void Simulator::Impl::fire_locked(std::uint32_t notify_index, bool nonstall, std::uint32_t info32,
                                  std::uint16_t info16) {
  for (auto& [h, c] : clients)
    for (auto& [oh, o] : c.objects) {
      if (o.klass != NV01_EVENT_OS_EVENT || o.event_fd < 0) continue;
      if ((o.notify_index & ~kEventFlagsMask) != notify_index) continue;
      if (bool(o.notify_index & NV01_EVENT_NONSTALL_INTR) != nonstall) continue;
      // A stall event fires only while its subdevice has the notification enabled.
      if (!nonstall) {
        Object& sub = c.objects.at(o.parent);
        auto n = sub.notification.find(notify_index);
        if (n == sub.notification.end() || n->second == 0) continue;
        if (n->second == 1) n->second = 0;  // SINGLE: once
      }
      auto f = files.find(o.event_fd);
      if (f != files.end()) f->second.pending.push_back({oh, notify_index, info32, info16});
    }
  moved.notify_all();
}

// ---- Controls.

std::uint32_t Simulator::Impl::control(std::uint32_t h_client, std::uint32_t h_object, std::uint32_t cmd,
                                       std::uint64_t params, std::uint32_t size) {
  const std::string what = fmt::format("RM_CONTROL {:#x} on {:#x}", cmd, h_object);
  Client* c = client(h_client);
  if (!c) return refuse(NV_ERR_INVALID_CLIENT, fmt::format("{}: no client {:#x}", what, h_client));
  Object* o = object(h_client, h_object);
  if (!o) return refuse(NV_ERR_INVALID_OBJECT_HANDLE, fmt::format("{}: client {:#x} has no object {:#x}", what,
                                                                  h_client, h_object));
  // The command must be one of the object's class (its high 16 bits name the class family).
  const Classes& cls = config.classes;
  std::size_t want = 0;
  std::uint32_t family = 0;
  switch (cmd) {
    case NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION: want = sizeof(NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_PARAMS); family = NV01_ROOT_CLIENT; break;
    case NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2: want = sizeof(NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS); family = NV01_ROOT_CLIENT; break;
    case NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: want = sizeof(NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS); family = NV01_ROOT_CLIENT; break;
    case NV0080_CTRL_CMD_GPU_GET_CLASSLIST: want = sizeof(NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS); family = NV01_DEVICE_0; break;
    case NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2: want = sizeof(NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS); family = NV01_DEVICE_0; break;
    case NV2080_CTRL_CMD_GPU_GET_GID_INFO: want = sizeof(NV2080_CTRL_GPU_GET_GID_INFO_PARAMS); family = NV20_SUBDEVICE_0; break;
    case NV2080_CTRL_CMD_EVENT_SET_NOTIFICATION: want = sizeof(NV2080_CTRL_EVENT_SET_NOTIFICATION_PARAMS); family = NV20_SUBDEVICE_0; break;
    case NV2080_CTRL_CMD_GR_GET_INFO: want = sizeof(NV2080_CTRL_GR_GET_INFO_PARAMS); family = NV20_SUBDEVICE_0; break;
    case NV2080_CTRL_CMD_TIMER_GET_TIME: want = sizeof(NV2080_CTRL_TIMER_GET_TIME_PARAMS); family = NV20_SUBDEVICE_0; break;
    case NV2080_CTRL_CMD_PERF_BOOST: want = sizeof(NV2080_CTRL_PERF_BOOST_PARAMS); family = NV20_SUBDEVICE_0; break;
    case NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN: want = sizeof(NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS); family = cls.channel; break;
    case NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: want = sizeof(NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS); family = KEPLER_CHANNEL_GROUP_A; break;
    default: return refuse(NV_ERR_NOT_SUPPORTED, what + ": no such control");
  }
  if (o->klass != family)
    return refuse(NV_ERR_NOT_SUPPORTED, fmt::format("{}: a {:#x} has no such control (it is a {:#x}'s)", what, o->klass,
                                                    family));
  if (config.gvisor && cmd == NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2)
    return refuse(NV_ERR_NOT_SUPPORTED, what + ": nvproxy does not allow GET_BUILD_VERSION_V2 (use the legacy 0x101 "
                                               "or CHECK_VERSION_STR)");
  if (size != want)
    return refuse(NV_ERR_INVALID_PARAM_STRUCT, fmt::format("{}: paramsSize {}, not {}", what, size, want));
  if (!params) return refuse(NV_ERR_INVALID_ARGUMENT, what + ": no parameters");
  // RM works on its own copy of the parameters, copied back at the end.
  alignas(8) std::array<std::byte, sizeof(NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS)> copy{};
  static_assert(sizeof copy >= sizeof(NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS));
  const std::uint64_t user_params = params;
  if (!copy_from_user(params, copy.data(), want))
    return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: its {} bytes of parameters at {:#x} are not readable", what,
                                                      want, params));
  params = reinterpret_cast<std::uint64_t>(copy.data());
  const std::uint32_t status = control_in_copy(*c, *o, cmd, params, what);
  if (!copy_to_user(user_params, copy.data(), want))
    return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: its parameters at {:#x} are not writable", what,
                                                      user_params));
  return status;
}

std::uint32_t Simulator::Impl::control_in_copy(Client& client, Object& object, std::uint32_t cmd,
                                               std::uint64_t params, const std::string& what) {
  Client* c = &client;
  Object* o = &object;
  const Classes& cls = config.classes;
  const std::string version = config.driver_version;
  auto copy_string = [](char* to, std::size_t n, const std::string& s) {
    std::memset(to, 0, n);
    std::memcpy(to, s.data(), std::min(s.size(), n - 1));
  };
  switch (cmd) {
    case NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION: {
      auto* p = params_of<NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_PARAMS>(params);
      p->changelistNumber = p->officialChangelistNumber = 0;
      if (!p->pDriverVersionBuffer && !p->pVersionBuffer && !p->pTitleBuffer) {
        p->sizeOfStrings = std::uint32_t(version.size() + 1);  // the size the caller needs
        return NV_OK;
      }
      if (!p->pDriverVersionBuffer || !p->pVersionBuffer || !p->pTitleBuffer || p->sizeOfStrings < version.size() + 1)
        return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: the three buffers of {} bytes cannot hold \"{}\"", what,
                                                           p->sizeOfStrings, version));
      for (std::uint64_t b : {p->pDriverVersionBuffer, p->pVersionBuffer, p->pTitleBuffer})
        if (!copy_to_user(b, version.c_str(), version.size() + 1))
          return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: the buffer at {:#x} is not writable", what, b));
      return NV_OK;
    }
    case NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2: {
      auto* p = params_of<NV0000_CTRL_SYSTEM_GET_BUILD_VERSION_V2_PARAMS>(params);
      copy_string(p->driverVersionBuffer, sizeof p->driverVersionBuffer, version);
      copy_string(p->versionBuffer, sizeof p->versionBuffer, version);
      copy_string(p->driverBranch, sizeof p->driverBranch, "r" + version.substr(0, version.find('.')) + "_00");
      copy_string(p->titleBuffer, sizeof p->titleBuffer, "rig's simulated NVIDIA kernel module " + version);
      p->changelistNumber = p->officialChangelistNumber = 0;
      return NV_OK;
    }
    case NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2: {
      auto* p = params_of<NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS>(params);
      if (p->gpuId != config.gpu_id)
        return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: no GPU has id {:#x} (the GPU is {:#x})", what, p->gpuId,
                                                           config.gpu_id));
      *p = NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS{config.gpu_id, 0, 0, 0, 0, 0, 0, -1};
      return NV_OK;
    }
    case NV0080_CTRL_CMD_GPU_GET_CLASSLIST:
    case NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2: {
      const std::vector<std::uint32_t> list{NV01_MEMORY_SYSTEM, NV01_MEMORY_LOCAL_USER, NV01_MEMORY_VIRTUAL,
                                            NV01_MEMORY_SYSTEM_OS_DESCRIPTOR, NV01_EVENT_OS_EVENT, GT200_DEBUGGER,
                                            FERMI_CONTEXT_SHARE_A, FERMI_VASPACE_A, KEPLER_CHANNEL_GROUP_A,
                                            cls.usermode, cls.channel, cls.compute, cls.copy};
      if (cmd == NV0080_CTRL_CMD_GPU_GET_CLASSLIST_V2) {
        auto* p = params_of<NV0080_CTRL_GPU_GET_CLASSLIST_V2_PARAMS>(params);
        std::memset(p, 0, sizeof *p);
        p->numClasses = std::uint32_t(list.size());
        std::ranges::copy(list, p->classList);
        return NV_OK;
      }
      auto* p = params_of<NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS>(params);
      if (!p->classList) {  // the first call asks how many
        p->numClasses = std::uint32_t(list.size());
        return NV_OK;
      }
      if (p->numClasses < list.size())
        return refuse(NV_ERR_INVALID_PARAM_STRUCT, fmt::format("{}: room for {} classes, {} to give", what,
                                                               p->numClasses, list.size()));
      if (!copy_to_user(p->classList, list.data(), list.size() * 4))
        return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: the list at {:#x} is not writable", what, p->classList));
      p->numClasses = std::uint32_t(list.size());
      return NV_OK;
    }
    case NV2080_CTRL_CMD_GPU_GET_GID_INFO: {
      auto* p = params_of<NV2080_CTRL_GPU_GET_GID_INFO_PARAMS>(params);
      if (p->index != 0) return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: index {}", what, p->index));
      std::memset(p->data, 0, sizeof p->data);
      if ((p->flags & 3) == NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY) {
        std::memcpy(p->data, config.uuid.data(), kUuidBytes);
        p->length = kUuidBytes;
      } else {
        const auto& u = config.uuid;
        std::string s = "GPU-";
        for (unsigned i = 0; i < kUuidBytes; ++i) {
          s += fmt::format("{:02x}", u[i]);
          if (i == 3 || i == 5 || i == 7 || i == 9) s += '-';
        }
        std::memcpy(p->data, s.data(), s.size());
        p->length = std::uint32_t(s.size() + 1);
      }
      return NV_OK;
    }
    case NV2080_CTRL_CMD_EVENT_SET_NOTIFICATION: {
      auto* p = params_of<NV2080_CTRL_EVENT_SET_NOTIFICATION_PARAMS>(params);
      if (p->event >= NV2080_NOTIFIERS_MAXCOUNT)
        return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: event {} beyond {}", what, p->event,
                                                           NV2080_NOTIFIERS_MAXCOUNT));
      if (p->action > NV2080_CTRL_EVENT_SET_NOTIFICATION_ACTION_REPEAT)
        return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: action {} is none of DISABLE, SINGLE, REPEAT", what,
                                                           p->action));
      o->notification[p->event] = p->action;
      return NV_OK;
    }
    case NV2080_CTRL_CMD_GR_GET_INFO: {
      auto* p = params_of<NV2080_CTRL_GR_GET_INFO_PARAMS>(params);
      if (p->grInfoListSize == 0 || p->grInfoListSize > NV2080_CTRL_GR_INFO_INDEX_MAX + 1 || !p->grInfoList)
        return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: a list of {} entries at {:#x}", what, p->grInfoListSize,
                                                           p->grInfoList));
      std::array<NV2080_CTRL_GR_INFO, NV2080_CTRL_GR_INFO_INDEX_MAX + 1> list;
      if (!copy_from_user(p->grInfoList, list.data(), p->grInfoListSize * sizeof list[0]))
        return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: the list at {:#x} is not readable", what, p->grInfoList));
      for (std::uint32_t i = 0; i < p->grInfoListSize; ++i) {
        if (list[i].index > NV2080_CTRL_GR_INFO_INDEX_MAX)
          return refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: entry {} asks index {:#x}", what, i, list[i].index));
        switch (list[i].index) {
          case NV2080_CTRL_GR_INFO_INDEX_SM_VERSION: list[i].data = cls.sm / 10 << 8 | cls.sm % 10; break;
          case 0x0D: list[i].data = 64; break;  // MAX_WARPS_PER_SM
          case 0x14: list[i].data = 1; break;   // LITTER_NUM_GPCS
          case 0x17: list[i].data = 1; break;   // LITTER_NUM_TPC_PER_GPC
          case 0x20: list[i].data = 2; break;   // LITTER_NUM_SM_PER_TPC
          default: list[i].data = 0;
        }
      }
      if (!copy_to_user(p->grInfoList, list.data(), p->grInfoListSize * sizeof list[0]))
        return refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: the list at {:#x} is not writable", what, p->grInfoList));
      return NV_OK;
    }
    case NV2080_CTRL_CMD_TIMER_GET_TIME:
      params_of<NV2080_CTRL_TIMER_GET_TIME_PARAMS>(params)->time_nsec = now_ns();
      return NV_OK;
    case NV2080_CTRL_CMD_PERF_BOOST: return NV_OK;
    case NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN:
      params_of<NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN_PARAMS>(params)->workSubmitToken = o->channel->token;
      return NV_OK;
    case NVA06C_CTRL_CMD_GPFIFO_SCHEDULE: {
      auto* p = params_of<NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS>(params);
      bool any = false;
      for (std::uint32_t ch : o->children) {
        Object& child = c->objects.at(ch);
        if (!child.channel) continue;
        schedule(*child.channel, p->bEnable != 0);
        any = true;
      }
      if (!any) return refuse(NV_ERR_INVALID_STATE, what + ": the group has no channel to schedule");
      return NV_OK;
    }
  }
  return refuse(NV_ERR_NOT_SUPPORTED, what + ": no such control");
}

}  // namespace rig::sim::nv
