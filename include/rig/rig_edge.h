/* rig_edge.h — the C side of the contract between rig and its drivers.
 *
 * rig calls a driver's five C functions (struct rig_driver) to run work: room, submit,
 * commit, settle and measures. They are plain C so that a driver's hot path never calls
 * back into C++ state that may lock. The contract is spec/Rig_edge.txt ("The C
 * functions"); this header states it for C.
 */
#ifndef RIG_EDGE_H
#define RIG_EDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define RIG_ALIGN8 alignas(8)
extern "C" {
#else
#define RIG_ALIGN8 _Alignas(8)
#endif

/* Answers of room. */
#define RIG_FITS 0  /* the parts and waits fit the queues now */
#define RIG_LATER 1 /* they fit once one of the device's values is reached */
#define RIG_GROW 2  /* they fit once the queues grow (Driver::grow) */
#define RIG_NEVER 3 /* they never fit, or name work the device does not run */

/* Answers of submit, commit, settle and measures. */
#define RIG_OK 0        /* done; for submit: the value is encoded, not yet committed */
#define RIG_COMMITTED 1 /* submit only: every value up to this one is committed */
#define RIG_FAILED 2    /* failed: rig loses the device with *failure as the reason */

/* Bytes of scratch each part of a submission carries for room and submit. */
#define RIG_SCRATCH 64

/* The most parameter bytes a launch carries. */
#define RIG_PARAMS_MAX 4096

/* Bytes of the buffer where room writes the reason of a RIG_NEVER (room's why). */
#define RIG_WHY 256

/* The number of timeline words in rig_words: one per device index (16 bits). */
#define RIG_WORDS 65536

/* The kinds of work of a part. 0 is no kind, which room answers RIG_NEVER. */
enum rig_kind { RIG_KIND_WORDS = 1, RIG_KIND_FILL = 2, RIG_KIND_COPY = 3, RIG_KIND_LAUNCH = 4 };

/* rows rows of width bytes: row i starts at src_offset + i * src_pitch of the source and
 * at dst_offset + i * dst_pitch of the destination. */
struct rig_box {
  uint64_t src_offset, dst_offset, width, rows, src_pitch, dst_pitch;
};

/* 32-bit words the driver places on the queue as they are. */
struct rig_words {
  const uint32_t *words;
  uint64_t count;
};

/* A C function of compiled code that submit calls with the queue's context (queue), its
 * argument and the value the work completes. It returns 0, or a driver-defined error
 * code, which fails the submit. */
struct rig_fill {
  int (*fn)(void *queue, void *arg, uint64_t v);
  void *arg;
  uint32_t ring_units;    /* queue units the fill may write at most, 0 if unknown */
  uint32_t segment_bytes; /* bytes of a segment it writes, 0 if none */
};

/* A copy of boxes between two ends of the device's memory, or a fill of dst with a byte
 * (fill >= 0; src is then unused). An end is the address of its first byte as the device's
 * work uses it, or 0 for memory named by handle only, which lies at `offset` bytes into
 * `handle`; handle and offset are given for every end. */
struct rig_copy {
  uint64_t src, dst;               /* addresses, 0 for handle-only memory */
  intptr_t src_handle, dst_handle; /* the regions' driver objects (locate's handle) */
  uint64_t src_offset, dst_offset; /* the ends' byte offsets in their handles */
  const struct rig_box *boxes;
  uint32_t count;
  int32_t fill; /* -1 for a copy; 0..255: the byte every destination byte gets */
};

/* A launch of a function over a grid. params holds param_bytes bytes, with the refs
 * already patched to addresses; ref_offsets names those 8-byte slots. */
struct rig_launch {
  uint64_t code;      /* the function's code value (Driver::entry's code) */
  const void *launch; /* the function's launch template (Driver::entry's launch) */
  uint32_t groups[3];
  uint32_t threads[3];
  uint32_t shared; /* bytes of group-shared memory */
  uint32_t param_bytes;
  const void *params;
  const uint32_t *ref_offsets;
  uint32_t ref_count;
};

/* One part of a submission: its queue (index into the facts' queues), its kind, the
 * earlier parts of other queues it starts after, its work, and its scratch. */
struct rig_part {
  uint32_t queue;
  uint32_t kind; /* enum rig_kind */
  const uint32_t *after;
  uint32_t after_count;
  union {
    struct rig_words words;
    struct rig_fill fill;
    struct rig_copy copy;
    struct rig_launch launch;
  } work;
  RIG_ALIGN8 unsigned char scratch[RIG_SCRATCH];
};

/* A wait of the device's queues for another device's value: the producer's timeline word
 * (its host address in rig_words, or its own word), the value, the producer's index and
 * whether a store on its queue (1) or its host (0) writes that word. */
struct rig_wait {
  const volatile uint64_t *word;
  uint64_t value;
  uint16_t device;
  uint8_t store;
};

/* The five C functions of a driver. edge is the device's C state (Facts::edge), whose
 * first member points to this table. rig calls them one at a time for each device. */
struct rig_driver {
  /* Whether parts and the waits of the submit after it fit the queues: RIG_FITS,
   * RIG_LATER, RIG_GROW or RIG_NEVER. It may write the parts' scratch.
   * why is a buffer of RIG_WHY bytes whose first byte rig sets to 0 before each call. The
   * driver writes it only when it answers RIG_NEVER: a NUL-terminated sentence (rig_never
   * writes one) that says which part, which limit, the value asked and the limit, such as
   * "part 0: 1 GiB of shared memory, over the function's limit of 64 KiB". rig raises
   * invalid_argument with the device's name and that sentence ("AMD:0: part 0: ..."); for a
   * why left empty, with a generic sentence that names every cause. */
  int (*room)(void *edge, struct rig_part *parts, uint32_t count, uint32_t waits, char *why);
  /* Encodes parts as the work of value v, after waits and the device's earlier work.
   * times is NULL, or (while a profile is taken) the pair where the driver writes v's
   * start and end on the host clock (rig_now_ns), or leaves 0 for work it cannot time.
   * Returns RIG_OK, RIG_COMMITTED or RIG_FAILED (setting *failure). */
  int (*submit)(void *edge, struct rig_part *parts, uint32_t count, const struct rig_wait *waits,
                uint32_t wait_count, uint64_t v, uint64_t *times, const char **failure);
  /* Lets the work up to v run. Committing a committed value does nothing. */
  int (*commit)(void *edge, uint64_t v, const char **failure);
  /* Writes the times of value v, which the word shows, if not yet written. May be NULL. */
  int (*settle)(void *edge, uint64_t v, uint64_t *times, const char **failure);
  /* Writes the measures of v's launches into out (rows of 3 + n words), or, given NULL,
   * frees what it kept of v. NULL for a driver whose facts list no counters. */
  int (*measures)(void *edge, uint64_t v, uint64_t *out, const char **failure);
};

/* Writes the reason of a RIG_NEVER into room's why, formatted as printf formats (cut to
 * RIG_WHY - 1 bytes, NUL-terminated), and returns RIG_NEVER, so that room can end with
 * `return rig_never(why, "part %u: ...", i, ...);`. Defined by rig; it allocates nothing. */
int rig_never(char *why, const char *format, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The host's clock: CLOCK_MONOTONIC in nanoseconds. Profiles use it for every time. */
uint64_t rig_now_ns(void);

/* Makes n bytes of code at addr, just written through data accesses, visible to
 * instruction fetch on this machine. Defined by rig; drivers that patch code call it. */
void rig_code_sync(void *addr, size_t n);

/* rig's array of timeline words, indexed by device index. A device's word is the one
 * its opener's make was given; other devices' queues may wait on it. */
extern volatile uint64_t rig_words[RIG_WORDS];

#ifdef __cplusplus
}
#endif

#endif /* RIG_EDGE_H */
