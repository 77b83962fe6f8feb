/* log.h — one-line structured logs (logfmt) to stderr, for journald.
 * Thread-safe: each line is formatted into a local buffer and written with one write(2), so lines
 * from different threads never interleave. The level is a process-wide atomic (changed on SIGHUP). */
#ifndef SRV_LOG_H
#define SRV_LOG_H

#include <stddef.h>

typedef enum { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG } log_level;

/* Once at start: makes writes to a pipe or socket on stderr non-blocking (see log.c). Writes that
 * fail (ENOSPC, EAGAIN, EPIPE...) drop the line and count it; the daemon never waits on its log. */
void log_init(void);
unsigned long long log_dropped(void);

void log_set_level(log_level lv);
log_level log_get_level(void);
int log_enabled(log_level lv);
/* "error" | "warn" | "info" | "debug" -> 0 on success. */
int log_level_parse(const char *s, log_level *out);
const char *log_level_name(log_level lv);

/* Writes "ts=... level=LV " followed by the formatted logfmt pairs and a newline. */
void log_msg(log_level lv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes src as a logfmt value into dst: bare when it is made of safe characters, otherwise quoted
 * with \" \\ and \xNN escapes. Always NUL-terminates (truncates with "..." when dst is too small). */
void log_quote(char *dst, size_t n, const char *src);

/* Writes a one-line error message into a caller's buffer (err may be NULL) and returns -1: the
 * "0, or -1 with err" convention of the config reader, the multipart parser and the others. */
int log_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
