/* drm.h — what <linux/kfd_ioctl.h> needs of <drm/drm.h>: the kernel's fixed-width types.
 *
 * Debian's linux-libc-dev ships kfd_ioctl.h but not the DRM headers it includes (those come
 * with libdrm-dev under /usr/include/libdrm, not as <drm/drm.h>). kfd_ioctl.h uses nothing
 * of DRM but __u32/__u64 and the ioctl macros, so this stands in for it. */
#ifndef RIG_AMD_SHIM_DRM_H
#define RIG_AMD_SHIM_DRM_H
#include <linux/types.h>
#endif
