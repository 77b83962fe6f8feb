/* devices.h — the device slots of model.devices (service layer): each slot's CUDA ordinal, whether
 * it is in rotation, why it left (for the log and /health), its error count and a sample of its
 * memory. The failure rule lives here: DEV_FAIL_AFTER batches in a row on one slot that end in a
 * device error (a failed launch or allocation: RNNT_ERR_DEVICE, RNNT_ERR_NOMEM) take the slot out of
 * rotation (sched_set_device_down); one that clears (a success in between) leaves it serving. A
 * SIGHUP reload builds runners on every slot again and puts back those that build and warm up.
 * Fault injection: RNNTD_FAULT=deviceN_fail[:count] makes batches on slot N fail as a failed launch.
 * Thread-safety: counters are atomics; the error text is written and read under srv.mu. */
#ifndef SRV_DEVICES_H
#define SRV_DEVICES_H

#include <stdatomic.h>
#include <stddef.h>

#include "cfg.h"
#include "rnnt.h"

#define DEV_FAIL_AFTER 3
#define DEV_MAX CFG_LIST_MAX

typedef struct srv srv;

typedef struct {
    int ordinal;                  /* CUDA ordinal; -1 on the CPU backend */
    _Atomic int failed;           /* out of rotation */
    _Atomic int streak;           /* batches in a row that ended in a device error */
    _Atomic long long errors;     /* batches that ended in a device error */
    _Atomic long long mem_used, mem_total; /* bytes (cudaMemGetInfo, whole device); -1: not known */
    char error[256];              /* why it left rotation; under srv.mu */
} dev_slot;

/* The slots model.devices asks for, on the backend c resolves to: `auto` is every visible GPU (one
 * slot on the CPU backend); a list is checked against the visible GPUs. 0, or -1 with err. */
int dev_resolve(const cfg *c, dev_slot *slots, int *n, char *err, size_t errlen);
/* Takes slot d out of rotation with `why` (logged at error level, shown by /health). */
void dev_fail(srv *s, int d, const char *why);
/* Puts slot d back in rotation (a reload built its runners again). */
void dev_restore(srv *s, int d);
/* A batch on slot d ended with st (err its message): counts device errors and applies the rule
 * above. Returns 1 when st is a device error. */
int dev_batch_done(srv *s, int d, rnnt_status st, const char *err);
/* Samples slot d's device memory (on a thread that works on that device, or the main thread). */
void dev_sample_memory(srv *s, int d);
/* A copy of slot d's failure text ("" while in rotation). */
void dev_error(srv *s, int d, char *out, size_t n);

#endif
