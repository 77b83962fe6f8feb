/* metrics.h — process-wide counters, gauges and histograms, rendered as Prometheus text (0.0.4)
 * and summarised for /health. Thread-safe: every update is a lock-free atomic; a render reads each
 * value atomically (a scrape may see one request counted in one series and not yet in another). */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stddef.h>

typedef enum { EP_TRANSCRIBE = 0, EP_HEALTH, EP_METRICS, EP_OTHER, EP_COUNT } metrics_endpoint;

typedef enum {
    REJECT_QUEUE_FULL = 0, /* scheduler queue at max_queue */
    REJECT_MEMORY,         /* limits.max_pending_bytes reached */
    REJECT_DRAINING,       /* shutting down */
    REJECT_NOT_READY,      /* model not loaded yet */
    REJECT_COUNT
} metrics_reject;

void metrics_init(void);
/* One answered request (any endpoint); total_s from the first byte of headers to the answer. */
void metrics_request(metrics_endpoint ep, unsigned status, double total_s);
/* A transcription answered 200: its audio length, queue wait and the compute time of its batch. */
void metrics_transcription(double audio_s, double queue_s, double compute_s, long long bytes_in);
/* A batch run by a worker: its size, compute time, the frames decoded and the padding frames
 * (sum over items of longest - own length). */
void metrics_batch(int size, double compute_s, long long frames, long long padding_frames);
void metrics_reject_inc(metrics_reject why);
void metrics_failed_decode(void);

/* Values owned elsewhere, read at render time. */
typedef struct {
    int ready;
    int draining;
    long long in_flight;      /* requests being received, queued or decoded */
    long long queue_depth;
    long long workers_busy;
    long long workers;
    long long connections;
    int n_loops;                      /* HTTP event loops */
    const long long *loop_connections; /* [n_loops] open connections of each */
    long long pending_bytes;
    double uptime_s;
    double start_time_s;      /* Unix time */
    const char *version, *model, *backend, *device;
    long long reloads_ok, reloads_failed;
    int n_devices;                    /* device slots (model.devices) */
    const struct metrics_device {
        const char *name;             /* the device's name */
        int ordinal;                  /* CUDA ordinal, -1 on the CPU */
        int up, workers, busy;
        long long batches, errors;
        long long mem_used, mem_total; /* -1: not known (not shown) */
        double busy_s, busy_fraction, running_frames;
    } *devices;
} metrics_gauges;

/* The scheduler whose drain rate, expected wait and hung workers /metrics shows (NULL: none). */
struct sched;
void metrics_set_sched(struct sched *s);

/* Prometheus text, malloc'd (NULL when out of memory); *len its length. */
char *metrics_render(const metrics_gauges *g, size_t *len);

typedef struct {
    long long requests_ok, requests_failed; /* transcriptions answered 2xx / other */
    long long batches, batch_items;
    double audio_s, compute_s;              /* sums over transcriptions / batches */
    double real_time_factor;                /* compute_s / audio_s; 0 when no audio yet */
} metrics_summary;

void metrics_summarise(metrics_summary *out);

#endif
