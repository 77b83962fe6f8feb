/* notify.h — systemd's readiness protocol (sd_notify): READY=1, STATUS=..., RELOADING=1, STOPPING=1.
 * Uses libsystemd when the build found it, else sends the datagram to $NOTIFY_SOCKET itself (the
 * protocol is one AF_UNIX datagram of newline-separated assignments). A no-op without NOTIFY_SOCKET.
 * Thread-safe (each call opens its own socket or uses libsystemd's, which is). */
#ifndef SRV_NOTIFY_H
#define SRV_NOTIFY_H

/* Sends the formatted assignments; returns 1 sent, 0 no NOTIFY_SOCKET, -1 error. */
int notify_send(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The watchdog interval systemd asks for (WatchdogSec= sets WATCHDOG_USEC, and WATCHDOG_PID when
 * it names this process), in seconds; 0 when there is no watchdog. */
double notify_watchdog_interval_s(void);
/* "libsystemd" or "builtin", for the startup log. */
const char *notify_impl(void);

#endif
