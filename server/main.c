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
#include "eng.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "scheduler.h"
#include "streams.h"
#include "srv.h"

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

/* Fills the automatic values (0) of batching.workers and model.cpu_threads for the backend the
 * configuration will get. A running daemon keeps its worker count (workers_running > 0). */
static void resolve_auto(cfg *c, long long workers_running)
{
    int cuda = c->backend == CFG_BACKEND_CUDA || (c->backend == CFG_BACKEND_AUTO && rnnt_cuda_available());
    cpu_set_t set;
    long ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    if (workers_running > 0) c->workers = workers_running;
    else if (c->workers == 0) c->workers = cuda ? 2 : (ncpu < 16 ? ncpu : 16);
    if (c->cpu_threads == 0 && !cuda) c->cpu_threads = ncpu / c->workers > 1 ? ncpu / c->workers : 1;
}

static void apply_reloadable(srv *s, const cfg *c)
{
    atomic_store(&s->max_body_bytes, c->max_body_bytes);
    atomic_store(&s->max_json_bytes, c->max_json_bytes);
    atomic_store(&s->max_audio_s, c->max_audio_s);
    atomic_store(&s->max_pending_bytes, c->max_pending_bytes);
    atomic_store(&s->request_timeout_s, c->request_timeout_s);
    atomic_store(&s->log_requests, (int)c->log_requests);
    log_set_level((log_level)c->log_level);
    if (s->sched) {
        sched_set_limits(s->sched, (int)c->max_batch, c->max_delay_us, (int)c->max_queue);
        sched_set_policy(s->sched, (int)c->delay_when_idle, (double)c->max_queue_wait_ms * 1e-3,
                         (double)c->worker_deadline_s);
    }
}

static int load_auth(const cfg *c, auth **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!c->auth_token_file[0]) return 0;
    int world = 0;
    if (auth_load(c->auth_token_file, out, &world, err, errlen)) return -1;
    if (world)
        log_msg(LOG_WARN, "msg=\"the token file can be read by every user; chmod 600 it\" file=%s",
                c->auth_token_file);
    return 0;
}

/* An engine generation starts serving: the scheduler spreads batches over idle workers when the
 * backend is the CPU (each worker a core, a batch's cost in proportion to its size); on the GPU one
 * larger batch costs about what a small one does, so it keeps forming the largest batch it can. */
static void engine_ready(srv *s, eng *e, const char *what)
{
    int spread = strcmp(eng_backend(e), "cpu") == 0;
    sched_set_spread(s->sched, spread);
    const rnnt_model_info *i = eng_info(e);
    char dev[160];
    log_quote(dev, sizeof dev, eng_device(e));
    log_msg(LOG_INFO,
            "msg=%s model=%s path=%s backend=%s device=%s feature_dim=%d vocab=%d params=%lld "
            "workers=%lld max_batch=%d max_frames=%d spread=%s warmup_s=%.3f",
            what, i->name, eng_path(e), eng_backend(e), dev, i->feature_dim, i->vocab_size,
            i->n_parameters, s->c.workers, eng_max_batch(e), eng_max_frames(e), spread ? "on" : "off", eng_warmup_s(e));
    notify_send("READY=1\nSTATUS=ready: model %s on %s, listening on %s port %u", i->name,
                eng_backend(e), s->c.listen, s->port);
}

/* SIGHUP: a new configuration and a new engine generation are built while the old one serves; then
 * they are swapped. Requests already validated keep the generation they started with. */
static void reload(srv *s, const cmdline *cl)
{
    char err[1024];
    notify_send("RELOADING=1\nSTATUS=reloading configuration and model");
    log_msg(LOG_INFO, "msg=\"reload requested (SIGHUP)\"");
    cfg nc;
    auth *na = NULL;
    eng *ne = NULL;
    int bad = build_config(cl, &nc, err, sizeof err);
    if (!bad) resolve_auto(&nc, s->c.workers);
    if (bad || load_auth(&nc, &na, err, sizeof err) ||
        eng_create(&nc, (int)s->c.workers, &ne, err, sizeof err)) {
        char q[1100];
        log_quote(q, sizeof q, err);
        log_msg(LOG_ERROR, "msg=\"reload failed; still serving the previous configuration\" err=%s", q);
        atomic_fetch_add(&s->reloads_failed, 1);
        auth_free(na);
        notify_send("READY=1\nSTATUS=reload failed: %.200s", err);
        return;
    }
    const char *which = NULL;
    /* Restart-only keys keep their running values; say so instead of ignoring them silently. */
    if (!cfg_restart_keys_equal(&s->c, &nc, &which))
        log_msg(LOG_WARN, "msg=\"some changed keys need a restart and keep their running values\" first=%s",
                which);
    /* Copy the reloadable keys into the running config. */
    for (const cfg_key *k = cfg_keys(); k->name; k++) {
        if (!k->reload) continue;
        size_t sz = k->type == CFG_T_STR ? k->size : sizeof(long long);
        memcpy((char *)&s->c + k->offset, (const char *)&nc + k->offset, sz);
    }
    pthread_mutex_lock(&s->mu);
    eng *old = s->engine;
    auth *old_auth = s->auth;
    s->engine = ne;
    s->auth = na;
    pthread_mutex_unlock(&s->mu);
    apply_reloadable(s, &s->c);
    eng_unref(old); /* freed once the last request validated against it is answered */
    auth_free(old_auth);
    atomic_fetch_add(&s->reloads_ok, 1);
    engine_ready(s, ne, "reloaded");
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

static void wait_until(_Atomic long long *v, double deadline)
{
    while (atomic_load(v) > 0 && sched_now() < deadline) sleep_s(0.005);
}

static void drain(srv *s)
{
    atomic_store(&s->draining, 1);
    notify_send("STOPPING=1\nSTATUS=draining: answering accepted requests");
    log_msg(LOG_INFO, "msg=\"shutting down: draining\" in_flight=%lld drain_timeout_s=%lld",
            atomic_load(&s->in_flight), s->c.drain_timeout_s);
    http_quiesce(s);
    sched_flush(s->sched);
    double deadline = sched_now() + (double)s->c.drain_timeout_s;
    long long streams_left = strm_drain(s, (double)s->c.drain_timeout_s);
    if (streams_left > 0) log_msg(LOG_WARN, "msg=\"drain timeout with streams open\" streams=%lld", streams_left);
    wait_until(&s->in_flight, deadline);
    long long left = atomic_load(&s->in_flight);
    /* From here no job is accepted (late ones get 503), so nothing new gets suspended. */
    int n = sched_cancel_waiting(s->sched);
    if (left > 0)
        log_msg(LOG_WARN, "msg=\"drain timeout\" in_flight=%lld cancelled=%d", left, n);
    /* Batches already running always finish (decoding is finite); their connections get resumed. */
    if (sched_wait_idle(s->sched, 600.0))
        log_msg(LOG_ERROR, "msg=\"engine workers still busy after 600 s\"");
    /* Resumed connections still have to be answered by the transport's loops before it may stop. */
    wait_until(&s->suspended, sched_now() + 10.0);
    if (atomic_load(&s->suspended) > 0)
        log_msg(LOG_ERROR, "msg=\"connections still suspended after the drain\" n=%lld",
                atomic_load(&s->suspended));
    /* A connection accepted just before the quiesce can still bring a request, answered 503 at once;
     * MHD_stop_daemon would cut that answer off. Stop only after 100 ms without any (2 s at most). */
    double end = sched_now() + 2.0, quiet_since = 0;
    while (sched_now() < end) {
        if (atomic_load(&s->in_flight) > 0) quiet_since = 0;
        else if (quiet_since == 0) quiet_since = sched_now();
        else if (sched_now() - quiet_since >= 0.1) break;
        sleep_s(0.005);
    }
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
                        "watchdog pings stopped", st.hung, s->c.worker_deadline_s);
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

/* Memory after large requests: big buffers (bodies, features) always get their own mappings, given
 * back on free (glibc otherwise raises its mmap threshold after the first large free, so the next
 * bodies land in the heap and stay there), few arenas, and what the heap keeps is trimmed when idle. */
#define MEM_MMAP_THRESHOLD (256 * 1024)
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
    if (build_config(&cl, &s->c, err, sizeof err)) {
        fprintf(stderr, "rnntd: %s\n", err);
        return 2;
    }
    if (print) {
        cfg_write_yaml(&s->c, stdout);
        return 0;
    }
    auth *a = NULL;
    if (load_auth(&s->c, &a, err, sizeof err)) {
        fprintf(stderr, "rnntd: %s\n", err);
        return 2;
    }
    if (check) {
        auth_free(a);
        /* The model too: its directory exists, parses and loads (weights, tokens, frontend block). */
        rnnt_model *m = NULL;
        if (rnnt_model_load(s->c.model_path, &m, err, sizeof err)) {
            fprintf(stderr, "rnntd: model.path '%s': %s\n", s->c.model_path, err);
            return 2;
        }
        printf("%s: OK (model %s loads from %s)\n", cl.config_path ? cl.config_path : "(defaults)",
               rnnt_model_get_info(m)->name, s->c.model_path);
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
    s->auth = a;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    s->t_start_unix = (double)tv.tv_sec + tv.tv_usec * 1e-6;
    s->t_start_mono = sched_now();
    unsigned rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (unsigned)tv.tv_usec ^ ((unsigned)getpid() << 16);
    snprintf(s->id_prefix, sizeof s->id_prefix, "%08x", rnd);
    metrics_init();
    resolve_auto(&s->c, 0);
    apply_reloadable(s, &s->c);

    log_msg(LOG_INFO, "msg=starting version=%s config=%s notify=%s pid=%d", RNNT_VERSION,
            cl.config_path ? cl.config_path : "(defaults)", notify_impl(), (int)getpid());
    sched_params sp = {(int)s->c.workers, (int)s->c.max_batch, s->c.max_delay_us, (int)s->c.max_queue,
                       (int)s->c.delay_when_idle, (double)s->c.max_queue_wait_ms * 1e-3,
                       (double)s->c.worker_deadline_s};
    sched_exec sx = {eng_run, NULL, eng_abandon};
    if (sched_create(&sp, &sx, &s->sched) != SCHED_OK) {
        log_msg(LOG_ERROR, "msg=\"cannot start the scheduler\"");
        return 1;
    }
    metrics_set_sched(s->sched);
    if (n_faults > 0)
        log_msg(LOG_WARN, "msg=\"fault injection on (RNNTD_FAULT); not for production\" faults=%s", faults);
    watchdog_start(s);
    if (strm_start(s, err, sizeof err)) {
        log_msg(LOG_ERROR, "msg=\"cannot start the stream workers\" err=\"%s\"", err);
        watchdog_stop();
        metrics_set_sched(NULL);
        sched_free(s->sched);
        return 1;
    }
    /* Listen first: /health/live answers and /health/ready says 503 while the model loads. */
    if (http_start(s, err, sizeof err)) {
        log_msg(LOG_ERROR, "msg=\"cannot start the HTTP server\" err=\"%s\"", err);
        watchdog_stop();
        metrics_set_sched(NULL);
        sched_free(s->sched);
        return 1;
    }
    log_msg(LOG_INFO,
            "msg=listening address=%s port=%u http_threads=%lld max_connections=%lld max_connections_per_ip=%lld "
            "head_timeout_s=%lld auth=%s workers=%lld cpu_threads=%lld",
            s->c.listen, s->port, s->c.http_threads, http_max_connections(s), s->c.max_connections_per_ip,
            s->c.head_timeout_s, s->auth ? "bearer" : "off",
            s->c.workers, s->c.cpu_threads);
    notify_send("STATUS=loading model %s", s->c.model_path);

    eng *e = NULL;
    if (eng_create(&s->c, (int)s->c.workers, &e, err, sizeof err)) {
        char q[1100];
        log_quote(q, sizeof q, err);
        log_msg(LOG_ERROR, "msg=\"cannot load the model\" err=%s", q);
        notify_send("STATUS=failed: %.200s", err);
        http_stop(s);
        strm_stop(s);
        watchdog_stop();
        metrics_set_sched(NULL);
        sched_free(s->sched);
        auth_free(s->auth);
        return 1;
    }
    pthread_mutex_lock(&s->mu);
    s->engine = e;
    pthread_mutex_unlock(&s->mu);
    atomic_store(&s->ready, 1);
    engine_ready(s, e, "ready");
    rnnt_fault_arm(); /* injected faults fire from now on, never during start-up or warm-up */

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

    drain(s);
    http_stop(s);
    strm_stop(s);
    watchdog_stop();
    eng_release_hangs(); /* RNNTD_FAULT=worker_hang: let the hung worker return */
    metrics_set_sched(NULL);
    sched_free(s->sched);
    s->sched = NULL;
    pthread_mutex_lock(&s->mu);
    eng *last = s->engine;
    s->engine = NULL;
    pthread_mutex_unlock(&s->mu);
    eng_unref(last);
    auth_free(s->auth);
    metrics_summary m;
    metrics_summarise(&m);
    log_msg(LOG_INFO, "msg=stopped requests_ok=%lld requests_failed=%lld batches=%lld audio_s=%.3f",
            m.requests_ok, m.requests_failed, m.batches, m.audio_s);
    pthread_mutex_destroy(&s->mu);
    return 0;
}
