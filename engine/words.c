/* words.c — token and word times from token frames (rnnt_result_token, rnnt_result_words) and SRT /
 * WebVTT documents of words (rnnt_words.h). Thread safety: reads its arguments only. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "rnnt_words.h"

static const char boundary[] = "\xe2\x96\x81"; /* U+2581 */

/* Where a token emitted on encoder frame `frame` stands on the input's time line (one rule for tokens
 * and word starts). */
static double frame_time_s(double frame_shift_s, int frame) { return frame * frame_shift_s; }

rnnt_status rnnt_result_token(const rnnt_model *m, const rnnt_result *res, int i, rnnt_token *out, char *err, size_t errlen)
{
    if (!m || !res || !out || i < 0 || i >= res->n_tokens)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "token %d of a result with %d", i, res ? res->n_tokens : 0);
    const char *text = rnnt_model_token(m, res->tokens[i]);
    if (!text) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "token id %d outside the vocabulary", res->tokens[i]);
    *out = (rnnt_token){.id = res->tokens[i],
                        .text = text,
                        .frame = res->frames[i],
                        .time_s = frame_time_s(rnnt_model_get_info(m)->frame_shift_s, res->frames[i]),
                        .prob = res->probs ? res->probs[i] : -1.0f};
    return RNNT_OK;
}

void rnnt_words_free(rnnt_word *w, int n)
{
    if (!w) return;
    for (int i = 0; i < n; i++) free(w[i].text);
    free(w);
}

/* Ends the word being built (cur[0..len), tokens first..last), if any, as w[*nw]. */
static rnnt_status close_word(const rnnt_result *res, double shift, double total, char *cur, size_t *len, int *first, int last,
                              rnnt_word *w, int *nw)
{
    if (*len) {
        cur[*len] = 0;
        rnnt_word *o = &w[*nw];
        if (!(o->text = strdup(cur))) return RNNT_ERR_NOMEM;
        o->first_token = *first;
        o->n_tokens = last - *first + 1;
        o->start_s = frame_time_s(shift, res->frames[*first]);
        double e = frame_time_s(shift, res->frames[last] + 1);
        o->end_s = e < total ? e : total;
        if (o->end_s < o->start_s) o->end_s = o->start_s;
        o->confidence = -1.0;
        if (res->probs) {
            /* Geometric mean: a word is as sure as its tokens jointly are, per token, so that long and
             * short words compare; one doubtful letter pulls it down more than an arithmetic mean. */
            double lp = 0.0;
            for (int i = *first; i <= last; i++) lp += log(res->probs[i] > 1e-30f ? (double)res->probs[i] : 1e-30);
            o->confidence = exp(lp / o->n_tokens);
        }
        (*nw)++;
    }
    *len = 0;
    *first = -1;
    return RNNT_OK;
}

rnnt_status rnnt_result_words(const rnnt_model *m, const rnnt_result *res, rnnt_word **words, int *n_words, char *err, size_t errlen)
{
    *words = NULL;
    *n_words = 0;
    const rnnt_model_info *info = rnnt_model_get_info(m);
    double shift = info->frame_shift_s, total = res->encoder_frames * shift;
    size_t textcap = 1;
    for (int i = 0; i < res->n_tokens; i++) {
        const char *t = rnnt_model_token(m, res->tokens[i]);
        if (!t) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "token id %d outside the vocabulary", res->tokens[i]);
        textcap += strlen(t);
    }
    /* at most one word per token; one scratch buffer holds the word being built */
    rnnt_word *w = calloc((size_t)(res->n_tokens ? res->n_tokens : 1), sizeof *w);
    char *cur = malloc(textcap);
    if (!w || !cur) {
        free(w);
        free(cur);
        return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    }
    int nw = 0, first = -1, last = -1;
    size_t len = 0;
    rnnt_status st = RNNT_OK;
    for (int i = 0; i < res->n_tokens && !st; i++) {
        const char *t = rnnt_model_token(m, res->tokens[i]);
        while (*t && !st) {
            if (!strncmp(t, boundary, 3)) {
                st = close_word(res, shift, total, cur, &len, &first, last, w, &nw);
                t += 3;
                continue;
            }
            if (first < 0) first = i;
            last = i;
            cur[len++] = *t++;
        }
    }
    if (!st) st = close_word(res, shift, total, cur, &len, &first, last, w, &nw);
    free(cur);
    if (st) {
        rnnt_words_free(w, nw);
        return rnnt_set_err(err, errlen, st, "out of memory");
    }
    /* emissions of neighbouring words can share a frame: a word ends no later than the next starts */
    for (int i = 0; i + 1 < nw; i++)
        if (w[i].end_s > w[i + 1].start_s) w[i].end_s = w[i + 1].start_s > w[i].start_s ? w[i + 1].start_s : w[i].start_s;
    if (!nw) {
        free(w);
        w = NULL;
    }
    *words = w;
    *n_words = nw;
    return RNNT_OK;
}

/* ---- subtitles ----------------------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (k < 0) { b->oom = 1; return; }
        if ((size_t)k < b->cap - b->len) { b->len += (size_t)k; return; }
        size_t nc = (b->cap + (size_t)k + 1) * 2;
        char *g = realloc(b->s, nc);
        if (!g) { b->oom = 1; return; }
        b->s = g;
        b->cap = nc;
    }
}

static void sb_time(sbuf *b, double t, char sep)
{
    long long ms = (long long)(t * 1000.0 + 0.5);
    if (ms < 0) ms = 0;
    sb_printf(b, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep, ms % 1000);
}

char *rnnt_subtitles(rnnt_subtitle_kind kind, const rnnt_word *w, int n, int max_words)
{
    if (max_words <= 0) max_words = 12;
    sbuf b = {malloc(256), 0, 256, 0};
    if (!b.s) return NULL;
    b.s[0] = 0;
    if (kind == RNNT_SUBS_VTT) sb_printf(&b, "WEBVTT\n");
    int cue = 0;
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && j - i < max_words && w[j].start_s - w[j - 1].end_s <= 1.0) j++;
        if (kind == RNNT_SUBS_VTT) sb_printf(&b, "\n");
        else sb_printf(&b, "%s%d\n", cue ? "\n" : "", cue + 1);
        sb_time(&b, w[i].start_s, kind == RNNT_SUBS_SRT ? ',' : '.');
        sb_printf(&b, " --> ");
        sb_time(&b, w[j - 1].end_s, kind == RNNT_SUBS_SRT ? ',' : '.');
        sb_printf(&b, "\n");
        for (int k = i; k < j; k++) sb_printf(&b, "%s%s", k > i ? " " : "", w[k].text);
        sb_printf(&b, "\n");
        cue++;
        i = j;
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
