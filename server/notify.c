/* notify.c — sd_notify, through libsystemd or a small built-in sender. */
#include "notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef RNNTD_HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>

const char *notify_impl(void) { return "libsystemd"; }

static int send_text(const char *text)
{
    int r = sd_notify(0, text); /* > 0 sent, 0 no NOTIFY_SOCKET, < 0 error */
    return r > 0 ? 1 : r == 0 ? 0 : -1;
}

#else
#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

const char *notify_impl(void) { return "builtin"; }

static int send_text(const char *text)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path) return 0;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t pl = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || pl >= sizeof sa.sun_path) return -1;
    memcpy(sa.sun_path, path, pl);
    if (path[0] == '@') sa.sun_path[0] = '\0'; /* abstract namespace */
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + pl);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    ssize_t n = sendto(fd, text, strlen(text), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
    close(fd);
    return n == (ssize_t)strlen(text) ? 1 : -1;
}
#endif

double notify_watchdog_interval_s(void)
{
    const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    if (!us || !*us || !getenv("NOTIFY_SOCKET")) return 0;
    char *end;
    unsigned long long v = strtoull(us, &end, 10);
    if (*end || v == 0) return 0;
    if (pid && *pid) {
        unsigned long long p = strtoull(pid, &end, 10);
        if (*end || p != (unsigned long long)getpid()) return 0;
    }
    return (double)v * 1e-6;
}

int notify_send(const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return send_text(text);
}
