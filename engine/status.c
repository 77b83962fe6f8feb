/* status.c — status names and the one error-message formatter every engine module uses. */
#include <stdarg.h>
#include <stdio.h>

#include "status.h"

const char *rnnt_status_str(rnnt_status s)
{
    switch (s) {
    case RNNT_OK: return "ok";
    case RNNT_ERR_INVALID: return "invalid argument";
    case RNNT_ERR_IO: return "i/o error";
    case RNNT_ERR_FORMAT: return "malformed input";
    case RNNT_ERR_NOMEM: return "out of memory";
    case RNNT_ERR_NUMERIC: return "non-finite value";
    case RNNT_ERR_UNSUPPORTED: return "unsupported";
    case RNNT_ERR_DEVICE: return "device error";
    case RNNT_ERR_TOO_LARGE: return "too large";
    }
    return "unknown status";
}

rnnt_status rnnt_set_err(char *err, size_t errlen, rnnt_status s, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return s;
}
