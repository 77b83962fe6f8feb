/* cfg.h — the daemon's configuration: one table of keys (name, type, bounds, default, field, doc),
 * read from a YAML file with libyaml. Unknown keys, duplicate keys, wrong types and out-of-range
 * values are errors reported as "FILE:LINE:COLUMN: KEY: what is wrong".
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
    long long device;
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

typedef enum { CFG_T_INT, CFG_T_BOOL, CFG_T_STR, CFG_T_ENUM } cfg_type;

typedef struct {
    const char *name;          /* dotted: "batching.max_batch" */
    cfg_type type;
    size_t offset;             /* into cfg */
    size_t size;               /* CFG_T_STR: buffer size */
    long long lo, hi;          /* CFG_T_INT bounds, inclusive */
    long long def_int;         /* default for INT, BOOL, ENUM (index into choices) */
    const char *def_str;       /* default for STR */
    const char *const *choices;/* CFG_T_ENUM: NULL-terminated */
    int reload;                /* 1: takes effect on SIGHUP; 0: needs a restart */
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

const char *cfg_backend_name(long long b);
const char *cfg_precision_name(long long p);

#endif
