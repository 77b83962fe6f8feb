/* reply.c — JSON responses, the error shape and the result documents (reply.h). */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rnnt_words.h"

void srv_err_set(srv_err *e, unsigned status, const char *code, const char *fmt, ...)
{
    e->status = status;
    e->code = code;
    e->retry_after_s = status == 503 ? REPLY_RETRY_AFTER_S : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

/* The header lines for o after Content-Type and Cache-Control (each ends in CRLF). */
static void format_headers(char *h, size_t n, const char *content_type, const reply_opts *o)
{
    size_t k = (size_t)snprintf(h, n, "Content-Type: %s\r\nCache-Control: no-store\r\n", content_type);
#define ADD(...) \
    do { \
        if (k < n) k += (size_t)snprintf(h + k, n - k, __VA_ARGS__); \
    } while (0)
    if (o && o->request_id && o->request_id[0]) ADD("X-Request-Id: %s\r\n", o->request_id);
    if (o && o->retry_after_s > 0) ADD("Retry-After: %d\r\n", o->retry_after_s);
    if (o && o->allow) ADD("Allow: %s\r\n", o->allow);
    if (o && o->www_authenticate) ADD("WWW-Authenticate: Bearer\r\n");
#undef ADD
}

int reply_text(tp_conn *c, unsigned status, const char *content_type, char *text, size_t len, const reply_opts *o)
{
    char h[512];
    format_headers(h, sizeof h, content_type, o);
    int rc = tp_respond(c, status, h, text, len, o && o->close);
    free(text);
    return rc;
}

int reply_json(tp_conn *c, unsigned status, json_t *body, const reply_opts *o)
{
    char *text = body ? json_dumps(body, REPLY_JSON_FLAGS) : NULL;
    json_decref(body);
    if (!text) {
        /* Out of memory while formatting: still answer with the error shape, from static text. */
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        return tp_respond(c, 500, "Content-Type: application/json\r\n", oom, sizeof oom - 1, o && o->close);
    }
    size_t len = strlen(text);
    /* A trailing newline makes curl output readable; JSON parsers ignore it. */
    char *t2 = realloc(text, len + 2);
    if (t2) {
        text = t2;
        text[len++] = '\n';
        text[len] = '\0';
    }
    return reply_text(c, status, "application/json", text, len, o);
}

char *reply_error_body(const srv_err *e)
{
    json_t *doc = json_pack("{s:{s:s,s:s}}", "error", "code", e->code ? e->code : "internal",
                            "message", e->message);
    if (!doc) return NULL;
    char *t = json_dumps(doc, REPLY_JSON_FLAGS);
    json_decref(doc);
    return t;
}

int reply_error(tp_conn *c, const srv_err *e, const reply_opts *o)
{
    unsigned status = e->status >= 400 && e->status <= 599 ? e->status : 500;
    /* json_pack with "s" rejects invalid UTF-8; messages may quote client bytes, so fall back to a
     * sanitised copy rather than losing the error. */
    json_t *doc = json_pack("{s:{s:s,s:s}}", "error", "code", e->code ? e->code : "internal",
                            "message", e->message);
    if (!doc) {
        char clean[sizeof e->message];
        size_t i = 0;
        for (; e->message[i] && i + 1 < sizeof clean; i++)
            clean[i] = (unsigned char)e->message[i] < 0x80 ? e->message[i] : '?';
        clean[i] = '\0';
        doc = json_pack("{s:{s:s,s:s}}", "error", "code", e->code ? e->code : "internal", "message",
                        clean);
    }
    return reply_json(c, status, doc, o);
}

json_t *reply_words_json(const rnnt_model *m, const rnnt_result *res)
{
    rnnt_word *w = NULL;
    int nw = 0;
    char err[128];
    if (rnnt_result_words(m, res, &w, &nw, err, sizeof err)) return NULL;
    json_t *a = json_array();
    for (int i = 0; a && i < nw; i++) {
        json_t *o = json_pack("{s:s, s:f, s:f, s:o}", "word", w[i].text, "start", w[i].start_s, "end", w[i].end_s, "confidence",
                              w[i].confidence >= 0 ? json_real(w[i].confidence) : json_null());
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            a = NULL;
        }
    }
    rnnt_words_free(w, nw);
    return a;
}

json_t *reply_result_json(const rnnt_model *m, const rnnt_result *res, const reply_result_info *ri)
{
    const rnnt_model_info *info = rnnt_model_get_info(m);
    json_t *toks = json_array();
    if (!toks) return NULL;
    for (int i = 0; res && i < res->n_tokens; i++) {
        rnnt_token t; /* its text and time from the engine */
        json_t *o = rnnt_result_token(m, res, i, &t, NULL, 0) ? NULL
                    : ri->timestamps ? json_pack("{s:i, s:s, s:i, s:f}", "id", t.id, "token", t.text, "frame", t.frame, "time_s", t.time_s)
                                     : json_pack("{s:i, s:s}", "id", t.id, "token", t.text);
        if (!o || json_array_append_new(toks, o)) {
            json_decref(toks);
            return NULL;
        }
    }
    json_t *doc = json_pack("{s:s, s:s, s:s, s:o, s:f, s:i, s:i, s:{s:f, s:f, s:f}}", "id", ri->request_id, "model",
                            info->name, "text", res && res->text ? res->text : "", "tokens", toks, "duration_s", ri->audio_s,
                            "frames", ri->frames, "batch_size", ri->batch_size, "timings", "queue_ms", ri->queue_s * 1e3,
                            "compute_ms", ri->compute_s * 1e3, "total_ms", ri->total_s * 1e3);
    if (doc && ri->timestamps && res) {
        /* Words with start, end and confidence; with timestamps, as the tokens' times. */
        json_t *words = reply_words_json(m, res);
        if (!words || json_object_set_new(doc, "words", words)) {
            json_decref(doc);
            return NULL;
        }
    }
    if (doc && ri->audio_prep_ms > 0 &&
        json_object_set_new(json_object_get(doc, "timings"), "audio_ms", json_real(ri->audio_prep_ms))) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}
