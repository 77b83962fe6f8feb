/* cu_stage.h — host staging of a batch's input: the utterances (scattered in the caller's pageable
 * memory) are copied back to back into one pinned buffer by the calling thread and a few helper
 * threads, in fixed-size chunks, and each finished prefix of chunks is sent to the device at once on a
 * copy stream. So the copy engine's transfer overlaps the host copy, and the host copy is split over
 * several cores (it was one thread's memcpy, then one transfer: 9.9 ms + ~2 ms for 82 MB at batch 256).
 *
 * Only the calling thread calls CUDA; helpers only copy host memory. One call at a time per stager
 * (the runner's rule: one thread at a time per state). */
#ifndef RNNT_CU_STAGE_H
#define RNNT_CU_STAGE_H

#include "cu_common.h"

#define CU_STAGE_CHUNK_DEFAULT ((size_t)2 << 20)
#define CU_STAGE_MAX_HELPERS 32

typedef struct cu_stager cu_stager;

/* helpers: threads beside the caller (0: none, everything on the calling thread; -1: the default,
 * min(3, online CPUs / 4)); chunk: bytes per chunk (0: CU_STAGE_CHUNK_DEFAULT). Helpers are woken only
 * for a batch of at least two chunks. */
rnnt_status cu_stager_create(int helpers, size_t chunk, cu_stager **out, char *err, size_t errlen);
void cu_stager_free(cu_stager *s);
int cu_stager_helpers(const cu_stager *s);
size_t cu_stager_chunk(const cu_stager *s);

/* Copies the n segments src[i] (bytes[i] each; a segment of 0 bytes may have src NULL) back to back
 * into pinned[0..sum), and enqueues on `stream` the host-to-device copy of that range to dev[0..sum)
 * as chunks complete. Returns when the host copies are done and every transfer is enqueued; the
 * transfers themselves complete on `stream` (pinned must not be rewritten before then). */
rnnt_status cu_stager_copy(cu_stager *s, int n, const void *const *src, const size_t *bytes, void *pinned, void *dev,
                           cudaStream_t stream, char *err, size_t errlen);

#endif
