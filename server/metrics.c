/* metrics.c — atomic counters and fixed-bucket histograms; Prometheus text exposition. */
#include "metrics.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "scheduler.h"

#define MAX_BUCKETS 20

static sched *_Atomic g_sched;
void metrics_set_sched(sched *s) { atomic_store(&g_sched, s); }

typedef struct {
    const char *name, *help;
    int n;
    double le[MAX_BUCKETS];
    _Atomic uint64_t count[MAX_BUCKETS + 1]; /* last = +Inf overflow */
    _Atomic uint64_t sum_bits;               /* a double, updated by compare-and-swap */
} histo;

static void atomic_add_double(_Atomic uint64_t *bits, double v)
{
    uint64_t old = atomic_load(bits), nw;
    do {
        double d;
        memcpy(&d, &old, sizeof d);
        d += v;
        memcpy(&nw, &d, sizeof nw);
    } while (!atomic_compare_exchange_weak(bits, &old, nw));
}

static double load_double(_Atomic uint64_t *bits)
{
    uint64_t b = atomic_load(bits);
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

static void histo_observe(histo *h, double v)
{
    int i = 0;
    while (i < h->n && v > h->le[i]) i++;
    atomic_fetch_add(&h->count[i], 1);
    atomic_add_double(&h->sum_bits, v);
}

#define SECONDS_BUCKETS 14, {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

static histo h_request = {"rnntd_request_duration_seconds",
                          "Time from the request's headers to its answer, /v1/transcribe only.",
                          SECONDS_BUCKETS, {0}, 0};
static histo h_queue = {"rnntd_queue_duration_seconds",
                        "Time a transcription waited in the queue before its batch started.",
                        SECONDS_BUCKETS, {0}, 0};
static histo h_compute = {"rnntd_compute_duration_seconds", "Engine time per batch.", SECONDS_BUCKETS,
                          {0}, 0};
static histo h_batch = {"rnntd_batch_size", "Utterances per batch.", 11,
                        {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, {0}, 0};
static histo h_audio = {"rnntd_request_audio_seconds", "Audio length of each transcription.", 10,
                        {0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}, {0}, 0};

static histo *const g_histos[] = {&h_request, &h_queue, &h_compute, &h_batch, &h_audio};

/* Status codes we count individually; anything else lands in the last slot. */
static const unsigned g_codes[] = {200, 400, 401, 404, 405, 408, 411, 413, 415, 422, 429, 500, 503, 0};
#define N_CODES (sizeof g_codes / sizeof g_codes[0])
static const char *const g_ep_names[EP_COUNT] = {"transcribe", "health", "metrics", "other"};
static const char *const g_reject_names[REJECT_COUNT] = {"queue_full", "memory", "draining",
                                                         "not_ready"};

static _Atomic uint64_t c_requests[EP_COUNT][N_CODES];
static _Atomic uint64_t c_reject[REJECT_COUNT];
static _Atomic uint64_t c_batches, c_batch_items, c_frames, c_padding, c_bytes_in, c_failed_decode;
static _Atomic uint64_t c_audio_bits, c_compute_bits; /* doubles */

void metrics_init(void)
{
    /* Static storage starts at zero; nothing to do beyond documenting that init is idempotent. */
}

void metrics_request(metrics_endpoint ep, unsigned status, double total_s)
{
    if ((int)ep < 0 || ep >= EP_COUNT) ep = EP_OTHER;
    size_t i = 0;
    while (i < N_CODES - 1 && g_codes[i] != status) i++;
    atomic_fetch_add(&c_requests[ep][i], 1);
    if (ep == EP_TRANSCRIBE) histo_observe(&h_request, total_s);
}

void metrics_transcription(double audio_s, double queue_s, double compute_s, long long bytes_in)
{
    (void)compute_s; /* counted once per batch in metrics_batch */
    histo_observe(&h_audio, audio_s);
    histo_observe(&h_queue, queue_s);
    atomic_add_double(&c_audio_bits, audio_s);
    atomic_fetch_add(&c_bytes_in, (uint64_t)(bytes_in > 0 ? bytes_in : 0));
}

void metrics_batch(int size, double compute_s, long long frames, long long padding_frames)
{
    histo_observe(&h_batch, size);
    histo_observe(&h_compute, compute_s);
    atomic_fetch_add(&c_batches, 1);
    atomic_fetch_add(&c_batch_items, (uint64_t)size);
    atomic_fetch_add(&c_frames, (uint64_t)frames);
    atomic_fetch_add(&c_padding, (uint64_t)padding_frames);
    atomic_add_double(&c_compute_bits, compute_s);
}

void metrics_reject_inc(metrics_reject why)
{
    if ((int)why >= 0 && why < REJECT_COUNT) atomic_fetch_add(&c_reject[why], 1);
}

void metrics_failed_decode(void) { atomic_fetch_add(&c_failed_decode, 1); }

void metrics_summarise(metrics_summary *o)
{
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < N_CODES; i++) {
        uint64_t v = atomic_load(&c_requests[EP_TRANSCRIBE][i]);
        if (g_codes[i] >= 200 && g_codes[i] < 300) o->requests_ok += (long long)v;
        else o->requests_failed += (long long)v;
    }
    o->batches = (long long)atomic_load(&c_batches);
    o->batch_items = (long long)atomic_load(&c_batch_items);
    o->audio_s = load_double(&c_audio_bits);
    o->compute_s = load_double(&c_compute_bits);
    o->real_time_factor = o->audio_s > 0 ? o->compute_s / o->audio_s : 0;
}

/* The text is written to an open_memstream FILE (a malloc'd buffer that grows); any write error
 * (out of memory) shows in ferror and render returns NULL. */

/* Label values are model names and device strings: escape \ " and newline as the format asks. */
static void put_label(FILE *b, const char *v)
{
    for (const char *s = v ? v : ""; *s; s++) {
        if (*s == '\\') fprintf(b, "\\\\");
        else if (*s == '"') fprintf(b, "\\\"");
        else if (*s == '\n') fprintf(b, "\\n");
        else fputc(*s, b);
    }
}

static void head(FILE *b, const char *name, const char *type, const char *help)
{
    fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_histo(FILE *b, histo *h)
{
    head(b, h->name, "histogram", h->help);
    uint64_t cum = 0;
    for (int i = 0; i < h->n; i++) {
        cum += atomic_load(&h->count[i]);
        fprintf(b, "%s_bucket{le=\"%g\"} %llu\n", h->name, h->le[i], (unsigned long long)cum);
    }
    cum += atomic_load(&h->count[h->n]);
    fprintf(b, "%s_bucket{le=\"+Inf\"} %llu\n", h->name, (unsigned long long)cum);
    fprintf(b, "%s_sum %.9g\n%s_count %llu\n", h->name, load_double(&h->sum_bits), h->name,
              (unsigned long long)cum);
}

/* Per device slot (label device="SLOT", the index in model.devices). */
static void render_devices(FILE *b, const metrics_gauges *g)
{
    if (g->n_devices < 1 || !g->devices) return;
    head(b, "rnntd_device_info", "gauge", "Each device slot's CUDA ordinal (-1 on the CPU) and name (value 1).");
    for (int d = 0; d < g->n_devices; d++) {
        fprintf(b, "rnntd_device_info{device=\"%d\",ordinal=\"%d\",name=\"", d, g->devices[d].ordinal);
        put_label(b, g->devices[d].name);
        fprintf(b, "\"} 1\n");
    }
    const struct {
        const char *name, *type, *help;
    } series[] = {
        {"rnntd_device_up", "gauge", "1 while the device is in rotation, 0 once taken out after repeated errors."},
        {"rnntd_device_batches_total", "counter", "Batches run on the device."},
        {"rnntd_device_errors_total", "counter", "Batches on the device that ended in a device error (launch or allocation)."},
        {"rnntd_device_busy_seconds_total", "counter", "Seconds with at least one batch running on the device."},
        {"rnntd_device_busy_fraction", "gauge", "Fraction of time with a batch running on the device (~10 s average)."},
        {"rnntd_device_workers_busy", "gauge", "Engine workers of the device running a batch."},
        {"rnntd_device_running_frames", "gauge", "Input frames of the batches running on the device (the load dispatch compares)."},
        {"rnntd_device_memory_used_bytes", "gauge", "Device memory in use (cudaMemGetInfo, every process; CUDA only)."},
        {"rnntd_device_memory_total_bytes", "gauge", "Device memory in all (CUDA only)."},
    };
    for (size_t k = 0; k < sizeof series / sizeof series[0]; k++) {
        int any = 0;
        for (int d = 0; d < g->n_devices; d++) {
            const struct metrics_device *v = &g->devices[d];
            if (k >= 7 && (k == 7 ? v->mem_used : v->mem_total) < 0) continue;
            if (!any++) head(b, series[k].name, series[k].type, series[k].help);
            fprintf(b, "%s{device=\"%d\"} ", series[k].name, d);
            switch (k) {
            case 0: fprintf(b, "%d\n", v->up); break;
            case 1: fprintf(b, "%lld\n", v->batches); break;
            case 2: fprintf(b, "%lld\n", v->errors); break;
            case 3: fprintf(b, "%.6f\n", v->busy_s); break;
            case 4: fprintf(b, "%.4f\n", v->busy_fraction); break;
            case 5: fprintf(b, "%d\n", v->busy); break;
            case 6: fprintf(b, "%.0f\n", v->running_frames); break;
            case 7: fprintf(b, "%lld\n", v->mem_used); break;
            default: fprintf(b, "%lld\n", v->mem_total); break;
            }
        }
    }
}

char *metrics_render(const metrics_gauges *g, size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    FILE *b = open_memstream(&text, &n);
    if (!b) return NULL;

    head(b, "rnntd_build_info", "gauge", "Version, model and backend of this process (value 1).");
    fprintf(b, "rnntd_build_info{version=\"");
    put_label(b, g->version);
    fprintf(b, "\",model=\"");
    put_label(b, g->model);
    fprintf(b, "\",backend=\"");
    put_label(b, g->backend);
    fprintf(b, "\",device=\"");
    put_label(b, g->device);
    fprintf(b, "\"} 1\n");

    head(b, "rnntd_requests_total", "counter", "Requests answered, by endpoint and HTTP status.");
    for (int e = 0; e < EP_COUNT; e++)
        for (size_t i = 0; i < N_CODES; i++) {
            uint64_t v = atomic_load(&c_requests[e][i]);
            /* Always show the success series of the main endpoint so rate() works from zero. */
            if (v == 0 && !(e == EP_TRANSCRIBE && g_codes[i] == 200)) continue;
            if (g_codes[i])
                fprintf(b, "rnntd_requests_total{endpoint=\"%s\",code=\"%u\"} %llu\n",
                          g_ep_names[e], g_codes[i], (unsigned long long)v);
            else
                fprintf(b, "rnntd_requests_total{endpoint=\"%s\",code=\"other\"} %llu\n",
                          g_ep_names[e], (unsigned long long)v);
        }

    head(b, "rnntd_rejected_total", "counter",
         "Transcriptions refused with 503 before decoding, by reason.");
    for (int r = 0; r < REJECT_COUNT; r++)
        fprintf(b, "rnntd_rejected_total{reason=\"%s\"} %llu\n", g_reject_names[r],
                  (unsigned long long)atomic_load(&c_reject[r]));

    head(b, "rnntd_decode_failures_total", "counter",
         "Utterances whose decoding failed (non-finite values or an engine error).");
    fprintf(b, "rnntd_decode_failures_total %llu\n",
              (unsigned long long)atomic_load(&c_failed_decode));
    head(b, "rnntd_batches_total", "counter", "Batches run by the engine workers.");
    fprintf(b, "rnntd_batches_total %llu\n", (unsigned long long)atomic_load(&c_batches));
    head(b, "rnntd_batch_utterances_total", "counter", "Utterances decoded in batches.");
    fprintf(b, "rnntd_batch_utterances_total %llu\n",
              (unsigned long long)atomic_load(&c_batch_items));
    head(b, "rnntd_frames_total", "counter", "Input feature frames decoded.");
    fprintf(b, "rnntd_frames_total %llu\n", (unsigned long long)atomic_load(&c_frames));
    head(b, "rnntd_padding_frames_total", "counter",
         "Frames of padding in batches (longest item minus each item's length, summed).");
    fprintf(b, "rnntd_padding_frames_total %llu\n", (unsigned long long)atomic_load(&c_padding));
    head(b, "rnntd_audio_seconds_total", "counter", "Audio transcribed, in seconds.");
    fprintf(b, "rnntd_audio_seconds_total %.6f\n", load_double(&c_audio_bits));
    head(b, "rnntd_compute_seconds_total", "counter", "Engine time spent in batches, in seconds.");
    fprintf(b, "rnntd_compute_seconds_total %.6f\n", load_double(&c_compute_bits));
    head(b, "rnntd_request_bytes_total", "counter", "Request body bytes of answered transcriptions.");
    fprintf(b, "rnntd_request_bytes_total %llu\n", (unsigned long long)atomic_load(&c_bytes_in));
    head(b, "rnntd_reloads_total", "counter", "SIGHUP reloads, by result.");
    fprintf(b, "rnntd_reloads_total{result=\"ok\"} %lld\nrnntd_reloads_total{result=\"failed\"} %lld\n",
              g->reloads_ok, g->reloads_failed);

    for (size_t i = 0; i < sizeof g_histos / sizeof g_histos[0]; i++) render_histo(b, g_histos[i]);

    const struct {
        const char *name, *help;
        long long v;
    } gauges[] = {
        {"rnntd_ready", "1 when the model is loaded and warmed up and not draining.", g->ready && !g->draining},
        {"rnntd_requests_in_flight", "Requests being received, queued or decoded.", g->in_flight},
        {"rnntd_queue_depth", "Transcriptions waiting for a worker.", g->queue_depth},
        {"rnntd_workers_busy", "Engine workers running a batch.", g->workers_busy},
        {"rnntd_workers", "Engine workers.", g->workers},
        {"rnntd_connections", "Open HTTP connections.", g->connections},
        {"rnntd_pending_bytes", "Request bodies and features held in memory.", g->pending_bytes},
    };
    for (size_t i = 0; i < sizeof gauges / sizeof gauges[0]; i++) {
        head(b, gauges[i].name, "gauge", gauges[i].help);
        fprintf(b, "%s %lld\n", gauges[i].name, gauges[i].v);
    }
    if (g->n_loops > 0) {
        head(b, "rnntd_http_loop_connections", "gauge",
             "Open HTTP connections of each event loop (server.http_threads; accepts go to the loop with the fewest).");
        for (int i = 0; i < g->n_loops; i++) fprintf(b, "rnntd_http_loop_connections{loop=\"%d\"} %lld\n", i, g->loop_connections[i]);
    }
    sched *sc = atomic_load(&g_sched);
    if (sc) {
        sched_stats ss;
        sched_get_stats(sc, &ss);
        head(b, "rnntd_queue_drain_frames_per_second", "gauge",
             "Measured drain rate: frames decoded per second of busy time (~10 s average; 0 until measured).");
        fprintf(b, "rnntd_queue_drain_frames_per_second %.1f\n", ss.drain_frames_per_s);
        head(b, "rnntd_queue_expected_wait_seconds", "gauge",
             "Frames queued divided by the drain rate (what batching.max_queue_wait_ms bounds).");
        fprintf(b, "rnntd_queue_expected_wait_seconds %.4f\n", ss.expected_wait_s);
        head(b, "rnntd_workers_hung", "gauge", "Workers whose batch has run past batching.worker_deadline_s.");
        fprintf(b, "rnntd_workers_hung %d\n", ss.hung);
        head(b, "rnntd_batches_abandoned_total", "counter",
             "Batches given up past batching.worker_deadline_s (their requests answered 500).");
        fprintf(b, "rnntd_batches_abandoned_total %lld\n", ss.abandoned);
    }
    render_devices(b, g);
    head(b, "rnntd_log_lines_dropped_total", "counter",
         "Log lines that could not be written (stderr full, closed or out of space).");
    fprintf(b, "rnntd_log_lines_dropped_total %llu\n", log_dropped());
    head(b, "rnntd_uptime_seconds", "gauge", "Seconds since the process started.");
    fprintf(b, "rnntd_uptime_seconds %.3f\n", g->uptime_s);
    head(b, "rnntd_start_time_seconds", "gauge", "Start time of the process, Unix seconds.");
    fprintf(b, "rnntd_start_time_seconds %.3f\n", g->start_time_s);

    int bad = ferror(b);
    if (fclose(b) || bad) {
        free(text);
        return NULL;
    }
    *len = n;
    return text;
}
