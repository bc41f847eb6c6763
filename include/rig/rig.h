/* rig.h — C access to rig's buffers, for libraries that submit work from C.
 *
 * A `struct rig_buffer` is a rig::Buffer seen from C (rig::c_buffer gives one). The
 * functions read where its bytes lie, claim its memory so that no donation writes it
 * meanwhile, and wait for the work a host access must follow (rig::Buffer::wait).
 */
#ifndef RIG_H
#define RIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rig_buffer;

/* The host address of the buffer's first byte, or NULL if the host does not address it. */
void *rig_buffer_host(const struct rig_buffer *b);
/* The buffer's length in bytes. */
size_t rig_buffer_bytes(const struct rig_buffer *b);
/* Where its bytes lie: *first, the offset of its first byte in its allocation, and *total,
 * the allocation's length. Returns 1 if it spans its allocation, 0 if not. */
int rig_buffer_span(const struct rig_buffer *b, size_t *first, size_t *total);
/* Why the buffer is dead, or NULL while it is usable. The text lives as long as the buffer. */
const char *rig_buffer_why(const struct rig_buffer *b);
/* Takes a read claim on its memory: 0, or -1 if it is dead or a claim holds it exclusive. */
int rig_buffer_claim(const struct rig_buffer *b);
/* Releases a claim rig_buffer_claim took. */
void rig_buffer_release(const struct rig_buffer *b);
/* Waits for the work a host read (write = 0) or write (write != 0) must follow: 0 once it is
 * done, -1 if the buffer is dead or that work's device was lost. */
int rig_buffer_wait(const struct rig_buffer *b, int write);

#ifdef __cplusplus
}
#endif

#endif /* RIG_H */
