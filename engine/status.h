/* status.h — the engine's error reporting (internal): every fallible function returns an rnnt_status
 * (rnnt.h) and writes a one-line message into the caller's buffer through rnnt_set_err. The status
 * names (rnnt_status_str) are public, in rnnt.h. Implemented in status.c.
 * Thread safety: rnnt_set_err writes only the caller's buffer; safe from any thread. */
#ifndef RNNT_STATUS_H
#define RNNT_STATUS_H

#include <stddef.h>

#include "rnnt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Formats a message into err (when err != NULL and errlen > 0; always NUL-terminated) and returns s. */
rnnt_status rnnt_set_err(char *err, size_t errlen, rnnt_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif
#endif
