/* log.c — logfmt lines to stderr. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "fault.h"

static _Atomic int g_level = LOG_INFO;
static _Atomic unsigned long long g_dropped;
/* How lines leave: plain write(2) to fd 2, send(2) without waiting (a socket, as journald's stream),
 * or write(2) to our own non-blocking open of the pipe (a new file description, so stderr's own flags,
 * which other processes may share, stay as they are). */
static int g_fd = STDERR_FILENO, g_sock;

void log_init(void)
{
    struct stat st;
    if (fstat(STDERR_FILENO, &st)) return;
    if (S_ISSOCK(st.st_mode)) {
        g_sock = 1;
    } else if (S_ISFIFO(st.st_mode)) {
        int fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) g_fd = fd;
    }
}

unsigned long long log_dropped(void) { return atomic_load(&g_dropped); }

/* One attempt, never blocking on a pipe or socket: a line that cannot be written now (full pipe,
 * journald stalled, disk full, stderr closed) is dropped and counted, and the caller goes on. */
static void write_line(const char *line, size_t len)
{
    int saved = errno; /* callers may read errno after logging */
    ssize_t w;
    if (rnnt_fault_hit("log_enospc")) {
        w = -1;
        errno = ENOSPC;
    } else if (g_sock) {
        w = send(g_fd, line, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    } else {
        w = write(g_fd, line, len);
    }
    if (w != (ssize_t)len) atomic_fetch_add(&g_dropped, 1);
    errno = saved;
}

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(log_level lv) { atomic_store(&g_level, (int)lv); }
log_level log_get_level(void) { return (log_level)atomic_load(&g_level); }
int log_enabled(log_level lv) { return (int)lv <= atomic_load(&g_level); }

int log_level_parse(const char *s, log_level *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0) {
            *out = (log_level)i;
            return 0;
        }
    return -1;
}

const char *log_level_name(log_level lv)
{
    return (lv >= LOG_ERROR && lv <= LOG_DEBUG) ? level_names[lv] : "?";
}

void log_msg(log_level lv, const char *fmt, ...)
{
    if (!log_enabled(lv)) return;
    char line[2048];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(tv.tv_usec / 1000), log_level_name(lv));
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    write_line(line, len); /* one write per line: lines from different threads never interleave */
}

static int safe_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("-._/:@+,%", c) != NULL;
}

void log_quote(char *dst, size_t n, const char *src)
{
    if (n == 0) return;
    if (!src) src = "";
    int bare = *src != '\0';
    for (const unsigned char *p = (const unsigned char *)src; *p && bare; p++) bare = safe_char(*p);
    size_t o = 0;
    if (bare) {
        size_t l = strlen(src);
        if (l < n) {
            memcpy(dst, src, l + 1);
            return;
        }
    }
    /* Quoted form; reserve room for the closing quote, a "..." marker and the NUL. */
    const size_t reserve = 5;
    if (n < reserve + 2) {
        dst[0] = '\0';
        return;
    }
    dst[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
        char esc[8];
        size_t el;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            el = 2;
        } else if (*p < 0x20 || *p >= 0x7f) {
            el = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *p);
        } else {
            esc[0] = (char)*p;
            el = 1;
        }
        if (o + el + reserve > n) {
            memcpy(dst + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(dst + o, esc, el);
        o += el;
    }
    dst[o++] = '"';
    dst[o] = '\0';
}

int log_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}
