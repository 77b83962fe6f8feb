/* cfg.c — the configuration table, its reading (through engine/yaml_doc.c) and writing, and the
 * apply hooks of each key (cfg.h). */
#include "cfg.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include "log.h"
#include "rnnt.h"
#include "yaml_doc.h"

static const char *const backend_choices[] = {"auto", "cpu", "cuda", NULL};
static const char *const precision_choices[] = {"fp16", "fp32", NULL};
static const char *const level_choices[] = {"error", "warn", "info", "debug", NULL};

#define OFF(f) offsetof(cfg, f)
#define INT(n, f, lo, hi, d, rl, doc) {n, CFG_T_INT, OFF(f), 0, lo, hi, d, NULL, NULL, rl, doc}
#define BOOL(n, f, d, rl, doc) {n, CFG_T_BOOL, OFF(f), 0, 0, 1, d, NULL, NULL, rl, doc}
#define STR(n, f, d, rl, doc) {n, CFG_T_STR, OFF(f), sizeof(((cfg *)0)->f), 0, 0, 0, d, NULL, rl, doc}
#define ENUM(n, f, ch, d, rl, doc) {n, CFG_T_ENUM, OFF(f), 0, 0, 0, d, NULL, ch, rl, doc}
#define LIST(n, f, lo, hi, rl, doc) {n, CFG_T_LIST, OFF(f), sizeof(cfg_int_list), lo, hi, 0, NULL, NULL, rl, doc}

static const cfg_key g_keys[] = {
    STR("server.listen", listen, "127.0.0.1", CFG_APPLY_RESTART,
        "Address to listen on (IPv4 or IPv6 literal). The default accepts loopback clients only;\n"
        "put a reverse proxy with TLS in front before opening it wider."),
    INT("server.port", port, 0, 65535, 8080, CFG_APPLY_RESTART, "TCP port; 0 picks a free one (logged at start)."),
    INT("server.http_threads", http_threads, 1, 64, 2, CFG_APPLY_RESTART,
        "HTTP event loops (epoll). They read, parse and answer requests; decoding runs on the workers."),
    INT("server.max_connections", max_connections, 1, 1048576, 4096, CFG_APPLY_RESTART,
        "Open connections at most. An idle or slow connection costs a file descriptor and well\n"
        "under 1 KiB (a buffer only while a request is being read), so this can be far above the\n"
        "workers. A connection over the cap is accepted, waits up to 0.5 s for a slot, then is\n"
        "answered 503 with Retry-After and Connection: close, and closed. The open-file limit\n"
        "(RLIMIT_NOFILE) is raised to fit at start, or the cap lowered to fit it (logged)."),
    INT("server.max_connections_per_ip", max_connections_per_ip, 0, 1048576, 0, CFG_APPLY_RESTART,
        "Open connections from one client address at most (beyond: 503 as above). 0: no cap per\n"
        "address (behind a reverse proxy every client has the proxy's address)."),
    INT("server.head_timeout_s", head_timeout_s, 1, 3600, 10, CFG_APPLY_RESTART,
        "A request head (request line and headers) must be complete this long after its first\n"
        "byte, or it gets 408 and the connection is closed (slow-header clients)."),
    INT("server.connection_timeout_s", connection_timeout_s, 1, 3600, 30, CFG_APPLY_RESTART,
        "A keep-alive connection with no request this long is closed; an upload that stalls this\n"
        "long gets 408, an answer the client does not read for this long is abandoned."),
    INT("server.request_timeout_s", request_timeout_s, 1, 86400, 120, CFG_APPLY_LIMITS,
        "An upload still incomplete this long after its head gets 408 and is closed (bounds\n"
        "clients that trickle a body to hold memory and a connection)."),
    INT("server.drain_timeout_s", drain_timeout_s, 0, 3600, 30, CFG_APPLY_DRAIN,
        "On SIGTERM/SIGINT: stop accepting, answer every accepted request, but wait at most this\n"
        "long; requests still queued then are answered 503."),
    STR("server.auth_token_file", auth_token_file, "", CFG_APPLY_AUTH,
        "File holding a bearer token; when set, /v1/* requires \"Authorization: Bearer <token>\".\n"
        "Health and metrics endpoints stay open. Empty: no authentication."),
    STR("model.path", model_path, "/usr/local/share/rnntd/model", CFG_APPLY_ENGINE,
        "Model directory (model.yaml, weights.safetensors, tokens.txt; see models/FORMAT.md)."),
    ENUM("model.backend", backend, backend_choices, CFG_BACKEND_AUTO, CFG_APPLY_ENGINE,
         "auto: CUDA when built in and a GPU is present, else CPU. cpu | cuda force one."),
    LIST("model.devices", devices, 0, 63, CFG_APPLY_RESTART,
         "GPUs to serve from: auto (every visible GPU) or a list of CUDA ordinals, e.g. [0, 1].\n"
         "Each entry gets its own weights, runners and batching.workers workers; a batch goes to\n"
         "the device with the least work in progress, a stream stays on one device, and a device\n"
         "whose batches keep failing is taken out of rotation (/health). An ordinal may repeat\n"
         "([0, 0]: two runner sets on one GPU). CPU backend: auto is one set; a list gives that\n"
         "many runner sets sharing the cores (the numbers are not used; for testing failover)."),
    ENUM("model.precision", precision, precision_choices, CFG_PRECISION_FP16, CFG_APPLY_ENGINE,
         "CUDA weights and activations: fp16 (fp32 accumulation) or fp32. The CPU computes in fp32."),
    INT("model.cpu_threads", cpu_threads, 0, 256, 0, CFG_APPLY_ENGINE,
        "BLAS threads per worker on the CPU backend; 0: the CPU cores divided by the workers."),
    INT("batching.workers", workers, 0, 64, 0, CFG_APPLY_RESTART,
        "Engine worker threads per device (model.devices), each with its own runner (scratch\n"
        "memory for one batch). 0: one per CPU core on the CPU backend (at most 16; divided among\n"
        "the runner sets of a CPU devices list), two per GPU. On the CPU, several\n"
        "single-threaded workers beat one worker with a multi-threaded BLAS on LSTM-sized matrices,\n"
        "and the waiting requests are shared out among the idle workers (8 requests, 2 idle workers:\n"
        "two batches of 4 at once). On a GPU a second worker stages one batch while the other's runs\n"
        "(+6-25% throughput measured), and a worker takes as large a batch as it can."),
    INT("batching.max_batch", max_batch, 1, RNNT_MAX_BATCH, 16, CFG_APPLY_ENGINE, "Utterances decoded together at most."),
    INT("batching.max_delay_us", max_delay_us, 0, 10000000, 5000, CFG_APPLY_SCHED,
        "How long the oldest queued request may wait for others to join its batch. It applies only\n"
        "to requests that arrive while every worker is busy: a request that finds a worker idle\n"
        "starts at once (see delay_when_idle). 0: never wait."),
    BOOL("batching.delay_when_idle", delay_when_idle, 0, CFG_APPLY_SCHED,
         "true: a request waits max_delay_us for company even when a worker is idle (fuller\n"
         "batches at low load, at the price of max_delay_us of latency for every lone request)."),
    INT("batching.max_queue", max_queue, 1, 1000000, 1024, CFG_APPLY_SCHED,
        "Requests waiting for a worker at most; beyond it requests get 503 with Retry-After.\n"
        "Keep it well below server.max_connections so that overload is refused, not queued."),
    INT("batching.max_queue_wait_ms", max_queue_wait_ms, 0, 3600000, 1000, CFG_APPLY_SCHED,
        "A request that would wait longer than this for a worker gets 503 at once, with Retry-After\n"
        "set to the time the queue needs to drain. The wait is estimated as the audio frames queued\n"
        "and still to decode in running batches, divided by the measured drain rate (frames decoded\n"
        "per second of busy time, averaged over ~10 s); until 3 batches have been decoded only\n"
        "max_queue applies. 0: no bound."),
    INT("batching.worker_deadline_s", worker_deadline_s, 0, 86400, 60, CFG_APPLY_SCHED,
        "A batch still running after this long is given up: its requests get a 500 naming this key\n"
        "at once, the worker counts as hung (/metrics rnntd_workers_hung), and the systemd\n"
        "watchdog pings stop so that systemd restarts the daemon (WatchdogSec in rnntd.service).\n"
        "The other workers keep serving. 0: no deadline."),
    INT("limits.max_body_bytes", max_body_bytes, 1024, 1LL << 34, 64LL << 20, CFG_APPLY_LIMITS,
        "Largest request body (any type); larger uploads get 413 as soon as the cap is crossed."),
    INT("limits.max_json_bytes", max_json_bytes, 1024, 1LL << 34, 16LL << 20, CFG_APPLY_LIMITS,
        "Largest JSON body (the smaller of this and max_body_bytes applies). JSON is 2-6 times\n"
        "the size of the same features as .npy (7-25 characters a value) and slower to parse;\n"
        "prefer .npy for long audio."),
    INT("limits.max_frames", max_frames, 1, 10000000, 6000, CFG_APPLY_ENGINE,
        "Feature frames per request at most (6000 = 60 s at a 10 ms hop); more gets 413.\n"
        "Each worker allocates scratch for max_batch utterances of this length."),
    INT("limits.max_pending_bytes", max_pending_bytes, 1 << 20, 1LL << 40, 1LL << 30, CFG_APPLY_LIMITS,
        "Request bodies and decoded features held in memory at once, over all requests; beyond it\n"
        "new requests get 503 with Retry-After."),
    INT("limits.max_audio_s", max_audio_s, 1, 86400, 60, CFG_APPLY_LIMITS,
        "Seconds of audio per request at most (audio bodies and /v1/audio/transcriptions files);\n"
        "checked from the header before the body is decoded where the format says (WAV, FLAC),\n"
        "while decoding otherwise; more gets 413. The features must also fit limits.max_frames."),
    INT("streaming.max_streams", stream_max_streams, 1, 1000000, 1000, CFG_APPLY_RESTART,
        "WebSocket streams (GET /v1/stream) open at most; beyond: 503 before the upgrade."),
    INT("streaming.workers", stream_workers, 0, 1024, 0, CFG_APPLY_RESTART,
        "Stream worker threads, each advancing its streams in batches; 0 = batching.workers."),
    INT("streaming.tick_ms", stream_tick_ms, 1, 1000, 20, CFG_APPLY_RESTART,
        "Every tick a stream worker advances each stream that has a ready chunk, all in one batch."),
    INT("streaming.max_batch", stream_max_batch, 1, RNNT_MAX_BATCH, 64, CFG_APPLY_RESTART, "Streams advanced in one batch at most."),
    INT("streaming.idle_timeout_s", stream_idle_timeout_s, 1, 86400, 30, CFG_APPLY_RESTART,
        "A stream that receives nothing this long (while the server waits for input) is closed (1008)."),
    INT("streaming.max_message_bytes", stream_max_message_bytes, 1024, 1LL << 30, 1LL << 20, CFG_APPLY_RESTART,
        "Largest WebSocket message (all fragments); larger closes the stream with 1009."),
    INT("streaming.max_pending_s", stream_max_pending_s, 1, 3600, 30, CFG_APPLY_RESTART,
        "Input not yet decoded, in seconds of audio, above which the stream's socket is not read\n"
        "(backpressure: a client faster than real time waits)."),
    INT("streaming.endpoint_silence_ms", stream_endpoint_silence_ms, 10, 600000, 1200, CFG_APPLY_RESTART,
        "Endpointing (asked per stream): a segment with text ends after this long without a token."),
    INT("streaming.endpoint_no_speech_ms", stream_endpoint_no_speech_ms, 10, 600000, 2400, CFG_APPLY_RESTART,
        "Endpointing: a segment without text starts again after this long (no final)."),
    INT("streaming.endpoint_max_segment_ms", stream_endpoint_max_segment_ms, 100, 3600000, 20000, CFG_APPLY_RESTART,
        "Endpointing: a segment with text ends once it is this long."),
    ENUM("log.level", log_level, level_choices, LOG_INFO, CFG_APPLY_LOG, "error | warn | info | debug."),
    BOOL("log.requests", log_requests, 1, CFG_APPLY_LOG, "One line per request (id, status, sizes, durations)."),
    {NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, 0, NULL},
};

const cfg_key *cfg_keys(void) { return g_keys; }

const cfg_key *cfg_find(const char *name)
{
    for (const cfg_key *k = g_keys; k->name; k++)
        if (strcmp(k->name, name) == 0) return k;
    return NULL;
}

const char *cfg_backend_name(long long b) { return (b >= 0 && b < 3) ? backend_choices[b] : "?"; }
const char *cfg_precision_name(long long p) { return (p >= 0 && p < 2) ? precision_choices[p] : "?"; }

static long long *int_field(cfg *c, const cfg_key *k) { return (long long *)((char *)c + k->offset); }
static const long long *int_field_c(const cfg *c, const cfg_key *k)
{
    return (const long long *)((const char *)c + k->offset);
}
static char *str_field(cfg *c, const cfg_key *k) { return (char *)c + k->offset; }
static const char *str_field_c(const cfg *c, const cfg_key *k) { return (const char *)c + k->offset; }

void cfg_defaults(cfg *c)
{
    memset(c, 0, sizeof *c);
    for (const cfg_key *k = g_keys; k->name; k++) {
        if (k->type == CFG_T_STR)
            snprintf(str_field(c, k), k->size, "%s", k->def_str);
        else if (k->type == CFG_T_LIST)
            memset(str_field(c, k), 0, k->size); /* auto */
        else
            *int_field(c, k) = k->def_int;
    }
}

/* Strict decimal integer: optional sign, digits only, no overflow. */
static int parse_int(const char *s, long long *out)
{
    if (!*s) return -1;
    const char *p = s;
    if (*p == '-' || *p == '+') p++;
    if (!*p) return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* Appends the integer text tok to a CFG_T_LIST value, within the key's bounds and CFG_LIST_MAX. */
static int list_add(cfg_int_list *l, const cfg_key *k, const char *tok, const char *where, char *err, size_t errlen)
{
    long long x;
    if (parse_int(tok, &x))
        return log_err(err, errlen, "%s%s: expected auto or a list of integers, got \"%.40s\"", where, k->name, tok);
    if (x < k->lo || x > k->hi)
        return log_err(err, errlen, "%s%s: %lld is out of range [%lld, %lld]", where, k->name, x, k->lo, k->hi);
    if (l->n == CFG_LIST_MAX) return log_err(err, errlen, "%s%s: more than %d entries", where, k->name, CFG_LIST_MAX);
    l->v[l->n++] = (int)x;
    return 0;
}

/* Sets key k from the text v; `where` prefixes messages ("FILE:L:C: " or "--flag: "). */
static int set_value(cfg *c, const cfg_key *k, const char *v, int quoted, const char *where, char *err,
                     size_t errlen)
{
    switch (k->type) {
    case CFG_T_STR: {
        size_t l = strlen(v);
        if (!quoted && (l == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0))
            return log_err(err, errlen, "%s%s: expected a string (write \"\" for none)", where, k->name);
        if (l >= k->size)
            return log_err(err, errlen, "%s%s: longer than %zu bytes", where, k->name, k->size - 1);
        for (size_t i = 0; i < l; i++)
            if ((unsigned char)v[i] < 0x20)
                return log_err(err, errlen, "%s%s: control character in the value", where, k->name);
        memcpy(str_field(c, k), v, l + 1);
        return 0;
    }
    case CFG_T_INT: {
        long long x;
        if (quoted || parse_int(v, &x))
            return log_err(err, errlen, "%s%s: expected an integer, got \"%.40s\"", where, k->name, v);
        if (x < k->lo || x > k->hi)
            return log_err(err, errlen, "%s%s: %lld is out of range [%lld, %lld]", where, k->name, x,
                        k->lo, k->hi);
        *int_field(c, k) = x;
        return 0;
    }
    case CFG_T_BOOL:
        if (!quoted && strcmp(v, "true") == 0) *int_field(c, k) = 1;
        else if (!quoted && strcmp(v, "false") == 0) *int_field(c, k) = 0;
        else return log_err(err, errlen, "%s%s: expected true or false, got \"%.40s\"", where, k->name, v);
        return 0;
    case CFG_T_LIST: {
        /* From text (a flag, or a YAML scalar): auto, or integers separated by commas, optionally in [ ]. */
        cfg_int_list l;
        memset(&l, 0, sizeof l);
        if (!quoted && strcmp(v, "auto") == 0) {
            memcpy(str_field(c, k), &l, sizeof l);
            return 0;
        }
        char buf[256];
        size_t len = strlen(v);
        if (len >= sizeof buf) return log_err(err, errlen, "%s%s: value too long", where, k->name);
        memcpy(buf, v, len + 1);
        char *p = buf;
        if (*p == '[' && len >= 2 && buf[len - 1] == ']') {
            buf[len - 1] = '\0';
            p++;
        }
        for (char *tok = p; tok;) { /* every entry between commas, empty ones included (an error) */
            char *comma = strchr(tok, ',');
            if (comma) *comma = '\0';
            while (*tok == ' ') tok++;
            size_t tl = strlen(tok);
            while (tl > 0 && tok[tl - 1] == ' ') tok[--tl] = '\0';
            if (list_add(&l, k, tok, where, err, errlen)) return -1;
            tok = comma ? comma + 1 : NULL;
        }
        if (l.n == 0)
            return log_err(err, errlen, "%s%s: expected auto or a list of integers, got \"%.40s\"", where, k->name, v);
        memcpy(str_field(c, k), &l, sizeof l);
        return 0;
    }
    case CFG_T_ENUM:
        for (int i = 0; k->choices[i]; i++)
            if (strcmp(v, k->choices[i]) == 0) {
                *int_field(c, k) = i;
                return 0;
            }
        {
            char list[128] = "";
            for (int i = 0; k->choices[i]; i++) {
                strncat(list, i ? " | " : "", sizeof list - strlen(list) - 1);
                strncat(list, k->choices[i], sizeof list - strlen(list) - 1);
            }
            return log_err(err, errlen, "%s%s: \"%.40s\" is not one of %s", where, k->name, v, list);
        }
    }
    return log_err(err, errlen, "%s%s: unknown key type", where, k->name);
}

int cfg_set(cfg *c, const char *name, const char *value, char *err, size_t errlen)
{
    const cfg_key *k = cfg_find(name);
    if (!k) return log_err(err, errlen, "unknown key %s", name);
    char where[96];
    snprintf(where, sizeof where, "%s: ", "command line");
    /* A flag's value is always text; strings may be empty there. */
    return set_value(c, k, value, k->type == CFG_T_STR, where, err, errlen);
}

static int is_section(const char *s, size_t len)
{
    for (const cfg_key *k = g_keys; k->name; k++)
        if (strncmp(k->name, s, len) == 0 && k->name[len] == '.') return 1;
    return 0;
}

static void mark_where(char *buf, size_t n, const char *file, const yaml_node_t *node)
{
    snprintf(buf, n, "%s:%zu:%zu: ", file, node->start_mark.line + 1, node->start_mark.column + 1);
}

static int scalar_quoted(const yaml_node_t *n)
{
    return n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
           n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

/* Structural errors at a node, positioned by the YAML reader. */
#define AT(node, ...) (ydoc_error(y, (node), RNNT_ERR_FORMAT, __VA_ARGS__), -1)

static int load_list(cfg *c, const cfg_key *k, yaml_document_t *doc, yaml_node_t *seq, const char *path, char *err,
                     size_t errlen);

static int load_doc(cfg *c, ydoc *y, char *err, size_t errlen)
{
    yaml_node_t *root = ydoc_root(y);
    if (!root) return 0; /* an empty file: every key at its default */
    if (root->type != YAML_MAPPING_NODE) return AT(root, "the file must be a mapping of sections (server:, model:, ...)");
    yaml_document_t *doc = &y->doc;
    char where[CFG_PATH_MAX + 64];
    unsigned char seen[sizeof g_keys / sizeof g_keys[0]] = {0};
    char seen_sections[8][32];
    int n_sections = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(doc, p->value);
        if (kn->type != YAML_SCALAR_NODE) return AT(kn, "a key must be a plain name");
        const char *sec = (const char *)kn->data.scalar.value;
        size_t sl = kn->data.scalar.length;
        if (strlen(sec) != sl || sl >= 32 || !is_section(sec, sl)) return AT(kn, "%.64s: unknown section", sec);
        for (int i = 0; i < n_sections; i++)
            if (strcmp(seen_sections[i], sec) == 0) return AT(kn, "%s: section given twice", sec);
        if (n_sections < 8) snprintf(seen_sections[n_sections++], 32, "%s", sec);
        if (vn->type != YAML_MAPPING_NODE) return AT(vn, "%s: expected a mapping of keys", sec);
        for (yaml_node_pair_t *q = vn->data.mapping.pairs.start; q < vn->data.mapping.pairs.top; q++) {
            yaml_node_t *k2 = yaml_document_get_node(doc, q->key);
            yaml_node_t *v2 = yaml_document_get_node(doc, q->value);
            if (k2->type != YAML_SCALAR_NODE) return AT(k2, "%s: a key must be a plain name", sec);
            char full[96];
            const char *kname = (const char *)k2->data.scalar.value;
            if (strlen(kname) != k2->data.scalar.length || k2->data.scalar.length > 48) return AT(k2, "%s: unknown key", sec);
            snprintf(full, sizeof full, "%s.%s", sec, kname);
            const cfg_key *k = cfg_find(full);
            if (!k) return AT(k2, "%s: unknown key", full);
            size_t idx = (size_t)(k - g_keys);
            if (seen[idx]) return AT(k2, "%s: key given twice", full);
            seen[idx] = 1;
            if (k->type == CFG_T_LIST && v2->type == YAML_SEQUENCE_NODE) {
                if (load_list(c, k, doc, v2, y->path, err, errlen)) return -1;
                continue;
            }
            if (v2->type != YAML_SCALAR_NODE) return AT(v2, "%s: expected a single value", full);
            const char *val = (const char *)v2->data.scalar.value;
            if (strlen(val) != v2->data.scalar.length) return AT(v2, "%s: NUL byte in the value", full);
            mark_where(where, sizeof where, y->path, v2);
            if (set_value(c, k, val, scalar_quoted(v2), where, err, errlen)) return -1;
        }
    }
    return 0;
}

/* A CFG_T_LIST key given as a YAML sequence of plain integers ([0, 1] or one "- 0" per line). */
static int load_list(cfg *c, const cfg_key *k, yaml_document_t *doc, yaml_node_t *seq, const char *path, char *err,
                     size_t errlen)
{
    cfg_int_list l;
    memset(&l, 0, sizeof l);
    char where[CFG_PATH_MAX + 64];
    mark_where(where, sizeof where, path, seq);
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
        yaml_node_t *n = yaml_document_get_node(doc, *it);
        mark_where(where, sizeof where, path, n);
        if (n->type != YAML_SCALAR_NODE || scalar_quoted(n) || strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
            return log_err(err, errlen, "%s%s: each entry must be an integer", where, k->name);
        if (list_add(&l, k, (const char *)n->data.scalar.value, where, err, errlen)) return -1;
    }
    if (l.n == 0) return log_err(err, errlen, "%s%s: an empty list (write auto for every device)", where, k->name);
    memcpy(str_field(c, k), &l, sizeof l);
    return 0;
}

#define CFG_YDOC_FLAGS (YDOC_EMPTY_OK | YDOC_ANY_ROOT | YDOC_ONE_DOC)

/* All-or-nothing: c is only changed when the whole document is good. */
static int load_parsed(cfg *c, ydoc *y, rnnt_status parsed, char *err, size_t errlen)
{
    cfg tmp = *c;
    int rc = parsed == RNNT_OK ? load_doc(&tmp, y, err, errlen) : -1;
    ydoc_free(y);
    if (rc == 0) *c = tmp;
    return rc;
}

int cfg_load_mem(cfg *c, const char *name, const char *text, size_t len, char *err, size_t errlen)
{
    ydoc y;
    return load_parsed(c, &y, ydoc_load_mem_flags(&y, name, text, len, CFG_YDOC_FLAGS, err, errlen), err, errlen);
}

int cfg_load_file(cfg *c, const char *path, char *err, size_t errlen)
{
    ydoc y;
    return load_parsed(c, &y, ydoc_load_flags(&y, path, CFG_YDOC_FLAGS, err, errlen), err, errlen);
}

int cfg_listen_addr(const char *listen, struct in_addr *v4, struct in6_addr *v6)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, listen, &a4) == 1) {
        if (v4) *v4 = a4;
        return 0;
    }
    char buf[64];
    size_t n = strlen(listen);
    if (n >= 2 && listen[0] == '[' && listen[n - 1] == ']' && n - 2 < sizeof buf) {
        memcpy(buf, listen + 1, n - 2);
        buf[n - 2] = '\0';
        listen = buf;
    }
    if (inet_pton(AF_INET6, listen, &a6) == 1) {
        if (v6) *v6 = a6;
        return 1;
    }
    return -1;
}

int cfg_validate(const cfg *c, char *err, size_t errlen)
{
    if (c->max_body_bytes > c->max_pending_bytes)
        return log_err(err, errlen,
                    "limits.max_body_bytes (%lld) exceeds limits.max_pending_bytes (%lld)",
                    c->max_body_bytes, c->max_pending_bytes);
    if (c->model_path[0] == '\0') return log_err(err, errlen, "model.path: must not be empty");
    if (cfg_listen_addr(c->listen, NULL, NULL) < 0)
        return log_err(err, errlen, "server.listen: \"%s\" is not an IPv4 or IPv6 address (names are not resolved)",
                    c->listen);
    return 0;
}

void cfg_format_value(const cfg *c, const cfg_key *k, char *buf, size_t n)
{
    switch (k->type) {
    case CFG_T_STR: {
        /* Double-quoted YAML; the loader rejects control characters, so only \ and " need escapes. */
        size_t o = 0;
        const char *s = str_field_c(c, k);
        if (n < 3) { buf[0] = '\0'; return; }
        buf[o++] = '"';
        for (; *s && o + 3 < n; s++) {
            if (*s == '"' || *s == '\\') buf[o++] = '\\';
            buf[o++] = *s;
        }
        buf[o++] = '"';
        buf[o] = '\0';
        return;
    }
    case CFG_T_INT: snprintf(buf, n, "%lld", *int_field_c(c, k)); return;
    case CFG_T_BOOL: snprintf(buf, n, "%s", *int_field_c(c, k) ? "true" : "false"); return;
    case CFG_T_ENUM: snprintf(buf, n, "%s", k->choices[*int_field_c(c, k)]); return;
    case CFG_T_LIST: {
        const cfg_int_list *l = (const cfg_int_list *)str_field_c(c, k);
        if (l->n == 0) {
            snprintf(buf, n, "auto");
            return;
        }
        size_t o = 0;
        buf[0] = '\0';
        for (int i = 0; i < l->n && o < n; i++) {
            int w = snprintf(buf + o, n - o, "%s%d", i ? ", " : "[", l->v[i]);
            if (w < 0) return;
            o += (size_t)w;
        }
        if (o < n) snprintf(buf + o, n - o, "]");
        return;
    }
    }
}

void cfg_write_yaml(const cfg *c, FILE *f)
{
    fputs("# rnntd configuration. Every key is shown at its default; unknown keys are errors.\n"
          "# Check a file with: rnntd --check-config --config FILE\n"
          "# Keys marked (restart) are read at start only; the others are re-read on SIGHUP\n"
          "# (systemctl reload rnntd), which also reloads the model without dropping requests.\n",
          f);
    char section[32] = "";
    for (const cfg_key *k = g_keys; k->name; k++) {
        const char *dot = strchr(k->name, '.');
        size_t sl = (size_t)(dot - k->name);
        if (strlen(section) != sl || strncmp(section, k->name, sl) != 0) {
            snprintf(section, sizeof section, "%.*s", (int)sl, k->name);
            fprintf(f, "\n%s:\n", section);
        }
        const char *d = k->doc;
        while (d && *d) {
            const char *nl = strchr(d, '\n');
            int len = nl ? (int)(nl - d) : (int)strlen(d);
            fprintf(f, "  # %.*s%s\n", len, d, (!nl && k->apply == CFG_APPLY_RESTART) ? " (restart)" : "");
            d = nl ? nl + 1 : d + len;
        }
        if (k->type == CFG_T_INT)
            fprintf(f, "  # integer in [%lld, %lld]\n", k->lo, k->hi);
        if (k->type == CFG_T_LIST)
            fprintf(f, "  # auto, or a list of 1 to %d integers in [%lld, %lld]\n", CFG_LIST_MAX, k->lo, k->hi);
        char val[CFG_VALUE_MAX]; /* a string of backslashes and quotes doubles when escaped */
        cfg_format_value(c, k, val, sizeof val);
        fprintf(f, "  %s: %s\n", dot + 1, val);
    }
}

static int key_equal(const cfg *a, const cfg *b, const cfg_key *k)
{
    if (k->type == CFG_T_LIST) return memcmp(str_field_c(a, k), str_field_c(b, k), k->size) == 0;
    return k->type == CFG_T_STR ? strcmp(str_field_c(a, k), str_field_c(b, k)) == 0 : *int_field_c(a, k) == *int_field_c(b, k);
}

int cfg_restart_keys_equal(const cfg *a, const cfg *b, const char **which)
{
    for (const cfg_key *k = g_keys; k->name; k++) {
        if (k->apply != CFG_APPLY_RESTART || key_equal(a, b, k)) continue;
        if (which) *which = k->name;
        return 0;
    }
    return 1;
}

int cfg_apply(const cfg *old, const cfg *c, const cfg_hooks *h, void *owner)
{
    int changed[CFG_APPLY_COUNT] = {0}, called = 0;
    for (const cfg_key *k = g_keys; k->name; k++)
        if (!old || !key_equal(old, c, k)) changed[k->apply] = 1;
    for (int i = CFG_APPLY_RESTART + 1; i < CFG_APPLY_COUNT; i++)
        if (changed[i] && h->hook[i]) {
            h->hook[i](owner, c);
            called++;
        }
    return called;
}
