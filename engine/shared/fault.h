/* fault.h — fault injection for tests: RNNTD_FAULT=name[:count][,name[:count]...] in the environment,
 * read once. Compiled in always and inert unless the variable is set. A fault fires only after
 * rnnt_fault_arm() (the daemon arms it after warm-up, before it reports ready: start-up runs clean), each
 * time a hook asks for it, `count` times (default 1; "always" or -1: every time).
 * Names: engine_nomem (a buffer allocation in rnnt_runner_decode fails), engine_error (the backend
 * reports a failed launch for the batch), worker_hang (the daemon's worker hangs in its batch),
 * log_enospc (the daemon's log writes fail with ENOSPC). Thread-safe. */
#ifndef RNNT_FAULT_H
#define RNNT_FAULT_H

#include <stddef.h>

/* Parses RNNTD_FAULT (once); returns how many faults are set, and describes them in desc
 * ("none" or the list); -1 with the problem in desc when the variable is malformed. */
int rnnt_fault_init(char *desc, size_t n);
void rnnt_fault_arm(void);
/* 1 when the named fault fires now (and counts it), else 0. */
int rnnt_fault_hit(const char *name);

#endif
