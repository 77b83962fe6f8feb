/* cfg.h — the daemon's configuration: one table of keys (name, type, bounds, default, field, apply
 * hook, doc), read from a YAML file through the engine's one YAML reader (engine/shared/yaml_doc.h, which also
 * reads model.yaml). Unknown keys, duplicate keys, wrong types and out-of-range values are errors
 * reported as "FILE:LINE:COLUMN: KEY: what is wrong". Owns: the key table, parsing, defaults, the
 * shipped file's text. Each key names the hook that applies it (Redis config.c's apply functions):
 * CFG_APPLY_RESTART keys are read at start only; the owners of the others (svc.c) get their hook
 * called by cfg_apply at start and, on SIGHUP, for the keys whose value changed.
 * Not thread-safe: a cfg is filled by one thread and then only read (SIGHUP builds a new one). */
#ifndef SRV_CFG_H
#define SRV_CFG_H

#include <stddef.h>
#include <stdio.h>

#define CFG_PATH_MAX 1024
/* Room for any value as cfg_format_value writes it: the longest string with every character
 * escaped, its quotes and the NUL. A smaller buffer cuts the value. */
#define CFG_VALUE_MAX (2 * CFG_PATH_MAX + 3)

typedef enum { CFG_BACKEND_AUTO = 0, CFG_BACKEND_CPU, CFG_BACKEND_CUDA } cfg_backend;

/* A list of small integers (model.devices): n == 0 is `auto`. */
#define CFG_LIST_MAX 16
typedef struct {
    int n;
    int v[CFG_LIST_MAX];
} cfg_int_list;
typedef enum { CFG_PRECISION_FP16 = 0, CFG_PRECISION_FP32 } cfg_precision;

typedef struct {
    /* server */
    char listen[64];
    long long port;
    long long http_threads;
    long long max_connections;
    long long max_connections_per_ip;
    long long head_timeout_s;
    long long connection_timeout_s;
    long long request_timeout_s;
    long long drain_timeout_s;
    char auth_token_file[CFG_PATH_MAX];
    /* model */
    char model_path[CFG_PATH_MAX];
    long long backend;   /* cfg_backend */
    cfg_int_list devices; /* model.devices: CUDA ordinals, one runner set each; n == 0: auto */
    long long precision; /* cfg_precision */
    long long cpu_threads;
    /* batching */
    long long workers;
    long long max_batch;
    long long max_delay_us;
    long long max_queue;
    long long max_queue_wait_ms;
    long long delay_when_idle;
    long long worker_deadline_s;
    /* limits */
    long long max_body_bytes;
    long long max_json_bytes;
    long long max_frames;
    long long max_pending_bytes;
    long long max_audio_s;
    /* streaming (WebSocket streams, server/streams.c) */
    long long stream_max_streams;
    long long stream_workers;
    long long stream_tick_ms;
    long long stream_max_batch;
    long long stream_idle_timeout_s;
    long long stream_max_message_bytes;
    long long stream_max_pending_s;
    long long stream_endpoint_silence_ms;
    long long stream_endpoint_no_speech_ms;
    long long stream_endpoint_max_segment_ms;
    /* log */
    long long log_level; /* log_level */
    long long log_requests;
} cfg;

typedef enum { CFG_T_INT, CFG_T_BOOL, CFG_T_STR, CFG_T_ENUM, CFG_T_LIST } cfg_type;

/* Who applies a key (the hooks are the owner's, given to cfg_apply). */
typedef enum {
    CFG_APPLY_RESTART = 0, /* read at start only; a changed value waits for a restart */
    CFG_APPLY_LIMITS,      /* request limits (svc): body, JSON, audio, bytes held, upload deadline */
    CFG_APPLY_SCHED,       /* the scheduler's queue and batching policy (svc) */
    CFG_APPLY_LOG,         /* log level and request lines */
    CFG_APPLY_ENGINE,      /* read by a new engine generation (svc builds one on every SIGHUP) */
    CFG_APPLY_AUTH,        /* the bearer token (re-read on every SIGHUP) */
    CFG_APPLY_DRAIN,       /* the shutdown drain */
    CFG_APPLY_COUNT
} cfg_apply_id;

typedef struct {
    const char *name;          /* dotted: "batching.max_batch" */
    cfg_type type;
    size_t offset;             /* into cfg */
    size_t size;               /* CFG_T_STR: buffer size; CFG_T_LIST: sizeof(cfg_int_list) */
    long long lo, hi;          /* CFG_T_INT and CFG_T_LIST (each entry) bounds, inclusive */
    long long def_int;         /* default for INT, BOOL, ENUM (index into choices) */
    const char *def_str;       /* default for STR */
    const char *const *choices;/* CFG_T_ENUM: NULL-terminated */
    cfg_apply_id apply;        /* CFG_APPLY_RESTART: needs a restart; else takes effect on SIGHUP */
    const char *doc;           /* one or more lines, written above the key in the shipped file */
} cfg_key;

/* The table, terminated by an entry with name == NULL. */
const cfg_key *cfg_keys(void);

void cfg_defaults(cfg *c);
/* Reads PATH over the values already in c (normally the defaults). */
int cfg_load_file(cfg *c, const char *path, char *err, size_t errlen);
/* The same from memory; `name` stands for the file name in messages. */
int cfg_load_mem(cfg *c, const char *name, const char *text, size_t len, char *err, size_t errlen);
/* Cross-key rules (e.g. max_json_bytes <= max_body_bytes); the message names the keys. */
int cfg_validate(const cfg *c, char *err, size_t errlen);
/* Parses server.listen: 0 an IPv4 literal (into *v4), 1 an IPv6 literal, bracketed or not (into
 * *v6), -1 neither. Either pointer may be NULL. */
struct in_addr;
struct in6_addr;
int cfg_listen_addr(const char *listen, struct in_addr *v4, struct in6_addr *v6);
/* Sets one key from a string as a flag would ("model.path", "server.port"), with the same checks. */
int cfg_set(cfg *c, const char *name, const char *value, char *err, size_t errlen);

/* Writes a complete, documented YAML file holding c (with the defaults this is conf/rnntd.yaml). */
void cfg_write_yaml(const cfg *c, FILE *f);
/* Writes the value of one key as it appears in YAML (whole when n >= CFG_VALUE_MAX). */
void cfg_format_value(const cfg *c, const cfg_key *k, char *buf, size_t n);
const cfg_key *cfg_find(const char *name);
/* 1 when every key the table marks restart-only has the same value in a and b; else 0 and the
 * name of the first difference in *which. */
int cfg_restart_keys_equal(const cfg *a, const cfg *b, const char **which);

/* The hooks of cfg_apply: hook[id](owner, c) applies every key of that id from c (NULL: nothing). */
typedef void (*cfg_apply_fn)(void *owner, const cfg *c);
typedef struct {
    cfg_apply_fn hook[CFG_APPLY_COUNT];
} cfg_hooks;
/* Calls each hook once whose keys differ between old and c (every hook when old is NULL): the
 * start-up and SIGHUP paths of a setting are the same code. Returns the number of hooks called. */
int cfg_apply(const cfg *old, const cfg *c, const cfg_hooks *h, void *owner);

const char *cfg_backend_name(long long b);
const char *cfg_precision_name(long long p);

#endif
