/* main.c — rnntd: flags, start-up, the signal loop (SIGHUP reload, SIGTERM/SIGINT drain), shutdown.
 * The signal handlers only write the signal number to a self-pipe that the main loop polls (a
 * signal may land on any thread, including OpenBLAS's, which start before main and so cannot all
 * be given a blocking mask). Exit status: 0 after a clean shutdown, 1 a start-up failure,
 * 2 a usage or configuration error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "cfg.h"
#include "fault.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "routes.h"
#include "scheduler.h"
#include "srv.h"
#include "streams.h"
#include "svc.h"

#define MAX_OVERRIDES 8
#define STATUS_EVERY_S 10.0

typedef struct {
    const char *config_path;
    const char *keys[MAX_OVERRIDES];
    const char *values[MAX_OVERRIDES];
    int n;
} cmdline;

static int g_sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t w = write(g_sig_pipe[1], &c, 1); /* async-signal-safe; a full pipe drops a duplicate */
    (void)w;
    errno = saved;
}

static int install_signals(void)
{
    if (pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK)) return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGINT, &sa, NULL) || sigaction(SIGHUP, &sa, NULL))
        return -1;
    signal(SIGPIPE, SIG_IGN); /* the transport sends with MSG_NOSIGNAL, but be sure */
    return 0;
}

/* Waits up to timeout_ms for a signal; returns its number or 0. */
static int next_signal(int timeout_ms)
{
    struct pollfd p = {g_sig_pipe[0], POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return 0;
    unsigned char c;
    return read(g_sig_pipe[0], &c, 1) == 1 ? c : 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rnntd [--config FILE] [--listen ADDR] [--port N] [--model DIR] [options]\n"
            "Speech-recognition daemon for LSTM transducers: POST features, get transcripts.\n"
            "  -c, --config FILE    YAML configuration (see conf/rnntd.yaml); without it, defaults\n"
            "  -l, --listen ADDR    override server.listen (default 127.0.0.1)\n"
            "  -p, --port N         override server.port (0 = any free port, logged at start)\n"
            "  -m, --model DIR      override model.path\n"
            "  -b, --backend NAME   override model.backend (auto | cpu | cuda)\n"
            "      --precision P    override model.precision (fp16 | fp32)\n"
            "      --check-config   check the configuration, token file and model (it loads), print OK, exit\n"
            "      --print-config   print the effective configuration as YAML, exit\n"
            "  -V, --version        print the version, exit\n"
            "  -h, --help           this text\n"
            "Signals: SIGHUP reloads the configuration and the model without dropping requests;\n"
            "SIGTERM/SIGINT stop accepting, answer every accepted request (server.drain_timeout_s),\n"
            "then exit 0.\n");
}

static int build_config(const cmdline *cl, cfg *c, char *err, size_t errlen)
{
    cfg_defaults(c);
    if (cl->config_path && cfg_load_file(c, cl->config_path, err, errlen)) return -1;
    for (int i = 0; i < cl->n; i++)
        if (cfg_set(c, cl->keys[i], cl->values[i], err, errlen)) return -1;
    return cfg_validate(c, err, errlen);
}

/* SIGHUP: the configuration is read again (file and flags) and handed to the service, which builds
 * a new generation while the old one serves and applies the reloadable keys. */
static void reload(srv *s, const cmdline *cl)
{
    char err[1024];
    notify_send("RELOADING=1\nSTATUS=reloading configuration and model");
    log_msg(LOG_INFO, "msg=\"reload requested (SIGHUP)\"");
    cfg nc;
    int ok = build_config(cl, &nc, err, sizeof err) == 0;
    svc_reload(s, &nc, ok, err);
}

/* ---- the systemd watchdog: WATCHDOG=1 every half interval while the scheduler makes progress,
 * i.e. while no worker is stuck in a batch past batching.worker_deadline_s. A hung worker stops the
 * pings, so systemd restarts the daemon (WatchdogSec= in rnntd.service). ---- */

static struct {
    pthread_t thread;
    int started, stop;
    double interval_s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} g_wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *watchdog_main(void *arg)
{
    srv *s = arg;
    int unhealthy = 0;
    pthread_mutex_lock(&g_wd.mu);
    while (!g_wd.stop) {
        pthread_mutex_unlock(&g_wd.mu);
        sched_stats st;
        sched_get_stats(s->sched, &st);
        if (st.hung == 0) {
            notify_send("WATCHDOG=1");
            if (unhealthy) log_msg(LOG_INFO, "msg=\"workers back in service; watchdog pings resume\"");
            unhealthy = 0;
        } else if (!unhealthy) {
            unhealthy = 1;
            log_msg(LOG_ERROR, "msg=\"worker stuck in a batch past batching.worker_deadline_s; watchdog pings stop\" hung=%d",
                    st.hung);
            notify_send("STATUS=unhealthy: %d worker(s) stuck past batching.worker_deadline_s (%lld s); "
                        "watchdog pings stopped", st.hung, (long long)st.worker_deadline_s);
        }
        pthread_mutex_lock(&g_wd.mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double half = g_wd.interval_s / 2;
        double until = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + half;
        ts.tv_sec = (time_t)until;
        ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
        if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
        if (!g_wd.stop) pthread_cond_timedwait(&g_wd.cv, &g_wd.mu, &ts);
    }
    pthread_mutex_unlock(&g_wd.mu);
    return NULL;
}

static void watchdog_start(srv *s)
{
    g_wd.interval_s = notify_watchdog_interval_s();
    if (g_wd.interval_s <= 0) return;
    if (pthread_create(&g_wd.thread, NULL, watchdog_main, s) == 0) g_wd.started = 1;
    log_msg(LOG_INFO, "msg=\"systemd watchdog\" interval_s=%.3f ping_every_s=%.3f", g_wd.interval_s,
            g_wd.interval_s / 2);
}

static void watchdog_stop(void)
{
    if (!g_wd.started) return;
    pthread_mutex_lock(&g_wd.mu);
    g_wd.stop = 1;
    pthread_cond_signal(&g_wd.cv);
    pthread_mutex_unlock(&g_wd.mu);
    pthread_join(g_wd.thread, NULL);
    g_wd.started = 0;
}

/* Memory after large requests: buffers over MEM_MMAP_THRESHOLD get their own mappings, given back on
 * free (glibc otherwise raises its mmap threshold after the first large free, so the next bodies land
 * in the heap and stay there), few arenas, and what the heap keeps is trimmed when idle. The threshold
 * is above a request's usual body and features (a 10 s .npy is 320 KB of each, 15 s 480 KB): at
 * 256 KB every such request mapped, faulted in and unmapped ~0.6 MB, ~35% of the transport's CPU per
 * request (server/THROUGHPUT.md); JSON bodies and long utterances' features still get their own
 * mappings (at 4 MB the 1.9 MB features of test_memory's 60 s rounds stayed in the heap: RSS 23 -> 30-43 MB
 * after them, one run over the test's bound; at 1 MB it comes back to 23 MB). */
#define MEM_MMAP_THRESHOLD (1024 * 1024)
#define MEM_ARENA_MAX 4
#define MEM_TRIM_IDLE_S 2.0

static void memory_tune(void)
{
    mallopt(M_MMAP_THRESHOLD, MEM_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, 4 * MEM_MMAP_THRESHOLD);
    if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, MEM_ARENA_MAX);
}

/* Called once a second from the main loop: after requests, once none is held for MEM_TRIM_IDLE_S,
 * gives the heap's free pages back to the system. */
static void memory_trim_when_idle(srv *s)
{
    static unsigned long long trimmed_at_id;
    static double idle_since;
    unsigned long long id = atomic_load(&s->next_id);
    if (id == trimmed_at_id) return;
    if (atomic_load(&s->in_flight) > 0 || atomic_load(&s->pending_bytes) > 0) {
        idle_since = 0;
        return;
    }
    double now = sched_now();
    if (idle_since == 0) idle_since = now;
    if (now - idle_since < MEM_TRIM_IDLE_S) return;
    malloc_trim(0);
    trimmed_at_id = id;
    idle_since = 0;
}

static void status_line(srv *s)
{
    metrics_summary m;
    metrics_summarise(&m);
    notify_send("STATUS=ready: %lld ok, %lld failed, %lld in flight, queue %d, rtf %.4f", m.requests_ok,
                m.requests_failed, atomic_load(&s->in_flight), sched_queue_depth(s->sched),
                m.real_time_factor);
}

int main(int argc, char **argv)
{
    cmdline cl = {0};
    int check = 0, print = 0;
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'},  {"listen", required_argument, 0, 'l'},
        {"port", required_argument, 0, 'p'},    {"model", required_argument, 0, 'm'},
        {"backend", required_argument, 0, 'b'}, {"precision", required_argument, 0, 'R'},
        {"check-config", no_argument, 0, 'C'},  {"print-config", no_argument, 0, 'P'},
        {"version", no_argument, 0, 'V'},       {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "c:l:p:m:b:Vh", opts, NULL)) != -1) {
        const char *key = NULL;
        switch (o) {
        case 'c': cl.config_path = optarg; break;
        case 'l': key = "server.listen"; break;
        case 'p': key = "server.port"; break;
        case 'm': key = "model.path"; break;
        case 'b': key = "model.backend"; break;
        case 'R': key = "model.precision"; break;
        case 'C': check = 1; break;
        case 'P': print = 1; break;
        case 'V': printf("rnntd %s\n", RNNT_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (key) {
            /* A later flag for the same key wins, as in most tools. */
            int i = 0;
            while (i < cl.n && strcmp(cl.keys[i], key)) i++;
            if (i == cl.n) cl.n++;
            cl.keys[i] = key;
            cl.values[i] = optarg;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rnntd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }

    static srv S;
    srv *s = &S;
    char err[1024];
    cfg c;
    if (build_config(&cl, &c, err, sizeof err)) {
        fprintf(stderr, "rnntd: %s\n", err);
        return 2;
    }
    if (print) {
        cfg_write_yaml(&c, stdout);
        return 0;
    }
    auth *a = NULL;
    if (svc_load_auth(&c, &a, err, sizeof err)) {
        fprintf(stderr, "rnntd: %s\n", err);
        return 2;
    }
    if (check) {
        auth_free(a);
        /* The model too: its directory exists, parses and loads (weights, tokens, frontend block). */
        rnnt_model *m = NULL;
        if (rnnt_model_load(c.model_path, &m, err, sizeof err)) {
            fprintf(stderr, "rnntd: model.path '%s': %s\n", c.model_path, err);
            return 2;
        }
        printf("%s: OK (model %s loads from %s)\n", cl.config_path ? cl.config_path : "(defaults)",
               rnnt_model_get_info(m)->name, c.model_path);
        rnnt_model_free(m);
        return 0;
    }

    log_init();
    memory_tune();
    char faults[256];
    int n_faults = rnnt_fault_init(faults, sizeof faults);
    if (n_faults < 0) {
        fprintf(stderr, "rnntd: %s\n", faults);
        auth_free(a);
        return 2;
    }
    if (install_signals()) {
        fprintf(stderr, "rnntd: cannot install signal handlers: %s\n", strerror(errno));
        auth_free(a);
        return 1;
    }

    pthread_mutex_init(&s->mu, NULL);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    s->t_start_unix = (double)tv.tv_sec + tv.tv_usec * 1e-6;
    s->t_start_mono = sched_now();
    unsigned rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (unsigned)tv.tv_usec ^ ((unsigned)getpid() << 16);
    snprintf(s->id_prefix, sizeof s->id_prefix, "%08x", rnd);
    metrics_init();
    svc_resolve_auto(&c, 0);

    log_msg(LOG_INFO, "msg=starting version=%s config=%s notify=%s pid=%d", RNNT_VERSION,
            cl.config_path ? cl.config_path : "(defaults)", notify_impl(), (int)getpid());
    if (svc_start(s, &c, a, err, sizeof err)) {
        log_msg(LOG_ERROR, "msg=\"%s\"", err);
        auth_free(a);
        return 1;
    }
    if (n_faults > 0)
        log_msg(LOG_WARN, "msg=\"fault injection on (RNNTD_FAULT); not for production\" faults=%s", faults);
    watchdog_start(s);
    if (strm_start(s, err, sizeof err)) {
        log_msg(LOG_ERROR, "msg=\"cannot start the stream workers\" err=\"%s\"", err);
        watchdog_stop();
        svc_stop(s);
        return 1;
    }
    /* Listen first: /health/live answers and /health/ready says 503 while the model loads. */
    if (routes_start(s, err, sizeof err)) {
        log_msg(LOG_ERROR, "msg=\"cannot start the HTTP server\" err=\"%s\"", err);
        watchdog_stop();
        svc_stop(s);
        return 1;
    }
    log_msg(LOG_INFO,
            "msg=listening address=%s port=%u http_threads=%lld max_connections=%lld max_connections_per_ip=%lld "
            "head_timeout_s=%lld auth=%s devices=%d workers=%d cpu_threads=%lld",
            s->c.listen, s->port, s->c.http_threads, routes_max_connections(s), s->c.max_connections_per_ip,
            s->c.head_timeout_s, a ? "bearer" : "off", svc_devices(s), svc_workers(s), s->c.cpu_threads);
    notify_send("STATUS=loading model %s", s->c.model_path);

    if (svc_load(s, err, sizeof err)) {
        char q[1100];
        log_quote(q, sizeof q, err);
        log_msg(LOG_ERROR, "msg=\"cannot load the model\" err=%s", q);
        notify_send("STATUS=failed: %.200s", err);
        routes_stop(s);
        strm_stop(s);
        watchdog_stop();
        svc_stop(s);
        return 1;
    }
    if (n_faults > 0) notify_send("STATUS=fault injection armed: %s", faults); /* svc_load armed them */

    double next_status = sched_now() + STATUS_EVERY_S;
    for (;;) {
        int sig = next_signal(1000);
        if (sig == SIGHUP) {
            reload(s, &cl);
        } else if (sig == SIGTERM || sig == SIGINT) {
            log_msg(LOG_INFO, "msg=\"signal received\" signal=%s", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            break;
        }
        memory_trim_when_idle(s);
        if (sched_now() >= next_status) {
            status_line(s);
            next_status = sched_now() + STATUS_EVERY_S;
        }
    }

    svc_drain_begin(s);
    routes_quiesce(s);
    svc_drain(s);
    routes_stop(s);
    strm_stop(s);
    watchdog_stop();
    svc_stop(s);
    metrics_summary m;
    metrics_summarise(&m);
    log_msg(LOG_INFO, "msg=stopped requests_ok=%lld requests_failed=%lld batches=%lld audio_s=%.3f",
            m.requests_ok, m.requests_failed, m.batches, m.audio_s);
    pthread_mutex_destroy(&s->mu);
    return 0;
}
