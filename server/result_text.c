/* result_text.c — the result document written straight to text (result_text.h). */
#include "result_text.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rnnt_words.h"

static int rt_reserve(rt_buf *b, size_t n)
{
    if (b->failed) return -1;
    if (b->len + n + 1 <= b->cap) return 0;
    size_t nc = b->cap ? b->cap * 2 : 4096;
    while (nc < b->len + n + 1) nc *= 2;
    char *p = realloc(b->p, nc);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = nc;
    return 0;
}

static void rt_put(rt_buf *b, const char *s, size_t n)
{
    if (rt_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

#define RT_LIT(b, s) rt_put((b), (s), sizeof(s) - 1)

static void rt_int(rt_buf *b, long long v)
{
    char t[32];
    int n = snprintf(t, sizeof t, "%lld", v);
    rt_put(b, t, (size_t)n);
}

void rt_free(rt_buf *b)
{
    free(b->p);
    *b = (rt_buf){0};
}

/* Length of the UTF-8 sequence at s (what jansson's utf8_iterate accepts: shortest form, no
 * surrogates, at most U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07;
    else return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    return n;
}

void rt_string(rt_buf *b, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    RT_LIT(b, "\"");
    size_t run = 0; /* bytes of s[0..run) not yet written */
    for (size_t i = 0; s[i];) {
        unsigned c = s[i];
        if (c >= 0x80) {
            size_t n = utf8_len(s + i);
            if (!n) {
                b->failed = 1;
                return;
            }
            i += n;
            continue;
        }
        if (c != '"' && c != '\\' && c >= 0x20) {
            i++;
            continue;
        }
        rt_put(b, (const char *)s + run, i - run);
        char esc[8];
        switch (c) {
        case '"': rt_put(b, "\\\"", 2); break;
        case '\\': rt_put(b, "\\\\", 2); break;
        case '\b': rt_put(b, "\\b", 2); break;
        case '\f': rt_put(b, "\\f", 2); break;
        case '\n': rt_put(b, "\\n", 2); break;
        case '\r': rt_put(b, "\\r", 2); break;
        case '\t': rt_put(b, "\\t", 2); break;
        default:
            snprintf(esc, sizeof esc, "\\u%04X", c);
            rt_put(b, esc, 6);
        }
        run = ++i;
    }
    size_t n = strlen((const char *)s + run);
    rt_put(b, (const char *)s + run, n);
    RT_LIT(b, "\"");
}

/* jansson's jsonp_dtostr at precision 7: %.7g, ".0" when there is neither '.' nor 'e', and the
 * exponent without '+' or leading zeros. */
void rt_real(rt_buf *b, double v)
{
    if (!isfinite(v)) {
        b->failed = 1; /* json_real refuses it */
        return;
    }
    char t[64];
    int n = snprintf(t, sizeof t, "%.7g", v);
    if (n < 0 || (size_t)n + 3 >= sizeof t) {
        b->failed = 1;
        return;
    }
    char *e = strchr(t, 'e');
    if (!e && !strchr(t, '.')) {
        t[n++] = '.';
        t[n++] = '0';
        t[n] = '\0';
    }
    if (e) {
        char *start = e + 1, *end = e + 2;
        if (*start == '-') start++;
        while (*end == '0') end++;
        if (end != start) {
            memmove(start, end, (size_t)(n - (end - t)) + 1);
            n -= (int)(end - start);
        }
    }
    rt_put(b, t, (size_t)n);
}

static void rt_words(rt_buf *b, const rnnt_model *m, const rnnt_result *res)
{
    rnnt_word *w = NULL;
    int nw = 0;
    char err[128];
    if (rnnt_result_words(m, res, &w, &nw, err, sizeof err)) {
        b->failed = 1;
        return;
    }
    RT_LIT(b, "[");
    for (int i = 0; i < nw && !b->failed; i++) {
        if (i) RT_LIT(b, ",");
        RT_LIT(b, "{\"word\":");
        rt_string(b, w[i].text);
        RT_LIT(b, ",\"start\":");
        rt_real(b, w[i].start_s);
        RT_LIT(b, ",\"end\":");
        rt_real(b, w[i].end_s);
        RT_LIT(b, ",\"confidence\":");
        if (w[i].confidence >= 0) rt_real(b, w[i].confidence);
        else RT_LIT(b, "null");
        RT_LIT(b, "}");
    }
    RT_LIT(b, "]");
    rnnt_words_free(w, nw);
}

char *result_text(const rnnt_model *m, const rnnt_result *res, const reply_result_info *ri, size_t *len)
{
    const rnnt_model_info *info = rnnt_model_get_info(m);
    rt_buf b = {0};
    if (!ri->request_id || !info->name) return NULL;
    rt_reserve(&b, 256 + (size_t)(res ? res->n_tokens : 0) * 64);
    RT_LIT(&b, "{\"id\":");
    rt_string(&b, ri->request_id);
    RT_LIT(&b, ",\"model\":");
    rt_string(&b, info->name);
    RT_LIT(&b, ",\"text\":");
    rt_string(&b, res && res->text ? res->text : "");
    RT_LIT(&b, ",\"tokens\":[");
    for (int i = 0; res && i < res->n_tokens && !b.failed; i++) {
        rnnt_token t;
        if (rnnt_result_token(m, res, i, &t, NULL, 0)) {
            b.failed = 1;
            break;
        }
        if (i) RT_LIT(&b, ",");
        RT_LIT(&b, "{\"id\":");
        rt_int(&b, t.id);
        RT_LIT(&b, ",\"token\":");
        rt_string(&b, t.text);
        if (ri->timestamps) {
            RT_LIT(&b, ",\"frame\":");
            rt_int(&b, t.frame);
            RT_LIT(&b, ",\"time_s\":");
            rt_real(&b, t.time_s);
        }
        RT_LIT(&b, "}");
    }
    RT_LIT(&b, "],\"duration_s\":");
    rt_real(&b, ri->audio_s);
    RT_LIT(&b, ",\"frames\":");
    rt_int(&b, ri->frames);
    RT_LIT(&b, ",\"batch_size\":");
    rt_int(&b, ri->batch_size);
    RT_LIT(&b, ",\"timings\":{\"queue_ms\":");
    rt_real(&b, ri->queue_s * 1e3);
    RT_LIT(&b, ",\"compute_ms\":");
    rt_real(&b, ri->compute_s * 1e3);
    RT_LIT(&b, ",\"total_ms\":");
    rt_real(&b, ri->total_s * 1e3);
    if (ri->audio_prep_ms > 0) {
        RT_LIT(&b, ",\"audio_ms\":");
        rt_real(&b, ri->audio_prep_ms);
    }
    RT_LIT(&b, "}");
    if (ri->timestamps && res) {
        RT_LIT(&b, ",\"words\":");
        rt_words(&b, m, res);
    }
    RT_LIT(&b, "}\n");
    if (b.failed) {
        rt_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
