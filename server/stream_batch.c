/* stream_batch.c — the sequence batcher: each stream worker's tick takes the input that arrived for
 * its streams, feeds their rnnt_streams (audio through the per-model frontend, or features), advances
 * every stream with a ready chunk in batches (rnnt_runner_advance_streams, one runner per worker
 * and model generation, on the engine's backend) and leaves partials and finals in each stream's outbox for the loop side. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "streams_int.h"
#include "rnnt_words.h"
#include "ws.h"

static wmodel *worker_model(strm_worker *w, eng *e, char *err, size_t errlen)
{
    for (wmodel *m = w->models; m; m = m->next)
        if (m->e == e) return m;
    wmodel *m = calloc(1, sizeof *m);
    if (!m) return snprintf(err, errlen, "out of memory"), NULL;
    rnnt_runner_params p = rnnt_runner_default_params();
    /* The engine's backend, device and precision: on CUDA each worker's runner keeps its streams'
     * states on the GPU (kernels/cu_stream.h). */
    const rnnt_runner_params *ep = eng_runner_params(e);
    p.backend = !strcmp(eng_backend(e), "cuda") ? RNNT_BACKEND_CUDA : RNNT_BACKEND_CPU;
    int ordinal = svc_device_ordinal(w->s, w->idx % svc_devices(w->s)); /* stream worker i: device slot i mod slots */
    p.device = ordinal >= 0 ? ordinal : ep->device;
    p.precision = ep->precision;
    p.max_batch = w->s->streams->max_batch;
    p.max_frames = STRM_RUNNER_FRAMES;
    p.cpu_threads = 1;
    if (rnnt_runner_create(eng_model(e), &p, &m->r, err, errlen) || rnnt_frontend_create(eng_model(e), &m->fe, err, errlen)) {
        rnnt_runner_free(m->r);
        free(m);
        return NULL;
    }
    m->e = eng_ref(e);
    m->next = w->models;
    w->models = m;
    return m;
}

/* Models no stream of this worker uses any more are let go (an old generation after a reload). */
static void worker_prune_models(strm_worker *w)
{
    pthread_mutex_lock(&w->s->mu);
    eng *current = w->s->engine;
    pthread_mutex_unlock(&w->s->mu);
    for (wmodel **pp = &w->models; *pp;) {
        wmodel *m = *pp;
        int used = 0;
        for (sess *q = w->list; q && !used; q = q->wnext) used = q->e == m->e;
        if (used || m->e == current) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        rnnt_runner_free(m->r);
        rnnt_frontend_free(m->fe);
        eng_unref(m->e);
        free(m);
    }
}

static void post_final(sess *q, char *text)
{
    out_msg *m = calloc(1, sizeof *m);
    if (!m || !text) {
        free(m);
        free(text);
        return;
    }
    m->text = text;
    m->len = strlen(text);
    pthread_mutex_lock(&q->mu);
    if (q->n_finals >= STRM_MAX_FINALS) {
        q->close_code = WS_CLOSE_POLICY;
        snprintf(q->close_reason, sizeof q->close_reason, "slow_reader");
        pthread_mutex_unlock(&q->mu);
        free(m->text);
        free(m);
        return;
    }
    *q->finals_tail = m;
    q->finals_tail = &m->next;
    q->n_finals++;
    /* A final supersedes the partial of its segment. */
    free(q->partial);
    q->partial = NULL;
    pthread_mutex_unlock(&q->mu);
}

/* A final for tokens [seg_token, end_token), ending at encoder frame end_frame: text, words with times
 * and confidence (rnnt_result_words: the geometric mean of the tokens' probabilities, as the whole
 * utterance's words), and the segment's confidence, the same mean over all its tokens (null without
 * probabilities, or with no tokens). */
static char *final_json(sess *q, const rnnt_result *res, int end_token, int end_frame, int last)
{
    const rnnt_model *m = eng_model(q->e);
    const rnnt_model_info *info = eng_info(q->e);
    rnnt_word *words = NULL;
    int nw = 0;
    char err[200];
    rnnt_result seg = *res;
    seg.n_tokens = end_token;
    rnnt_result_words(m, &seg, &words, &nw, err, sizeof err);
    json_t *ja = json_array();
    size_t tl = 0;
    for (int i = 0; i < nw; i++)
        if (words[i].first_token >= q->seg_token) tl += strlen(words[i].text) + 1;
    char *text = calloc(1, tl + 1);
    for (int i = 0; i < nw && ja && text; i++) {
        if (words[i].first_token < q->seg_token) continue;
        if (*text) strcat(text, " ");
        strcat(text, words[i].text);
        json_array_append_new(ja, json_pack("{s:s, s:f, s:f, s:o}", "word", words[i].text, "start", words[i].start_s, "end",
                                            words[i].end_s, "confidence",
                                            words[i].confidence >= 0 ? json_real(words[i].confidence) : json_null()));
    }
    double log_p = 0;
    int n_p = 0;
    for (int i = q->seg_token; res->probs && i < end_token; i++, n_p++) log_p += log(res->probs[i] > 0 ? res->probs[i] : 1e-30);
    double start = q->seg_frame * info->frame_shift_s, end = end_frame * info->frame_shift_s;
    json_t *doc = json_pack("{s:s, s:i, s:s, s:f, s:f, s:o, s:o, s:b}", "type", "final", "segment", q->seg, "text", text ? text : "",
                            "start", start, "end", end, "words", ja ? ja : json_array(), "confidence",
                            n_p ? json_real(exp(log_p / n_p)) : json_null(), "last", last);
    free(text);
    rnnt_words_free(words, nw);
    char *out = doc ? json_dumps(doc, REPLY_JSON_FLAGS) : NULL;
    json_decref(doc);
    return out;
}

/* Ends the current segment after token end_token - 1 (a final), the next starting at end_frame. */
static void end_segment(sess *q, const rnnt_result *res, int end_token, int end_frame)
{
    post_final(q, final_json(q, res, end_token, end_frame, 0));
    atomic_fetch_add(&q->s->streams->finals, 1);
    q->seg++;
    q->seg_token = end_token;
    q->seg_frame = end_frame;
}

/* Endpointing rules (README "Streaming"), on the token frames, so that where a segment ends does
 * not depend on how the input was chunked (except rule 3, checked after each advance):
 *   rule 1: a segment without tokens starts again once it is endpoint_no_speech_ms long (no final);
 *   rule 2: a segment with tokens ends after endpoint_silence_ms without a token (a gap between two
 *           tokens, or after the last one);
 *   rule 3: a segment with tokens ends once it is endpoint_max_segment_ms long. */
static void endpoint(sess *q, const rnnt_result *res, int is_final)
{
    strm_service *svc = q->s->streams;
    double shift = eng_info(q->e)->frame_shift_s;
    for (int i = q->seg_token + 1; i < res->n_tokens; i++)
        if ((res->frames[i] - res->frames[i - 1] - 1) * shift >= svc->ep_silence_s)
            end_segment(q, res, i, res->frames[i - 1] + 1);
    if (is_final) return;
    int has_text = res->n_tokens > q->seg_token;
    int last_frame = has_text ? res->frames[res->n_tokens - 1] + 1 : q->seg_frame;
    double trailing = (res->encoder_frames - last_frame) * shift;
    double seg_len = (res->encoder_frames - q->seg_frame) * shift;
    if (has_text && (trailing >= svc->ep_silence_s || seg_len >= svc->ep_max_segment_s))
        end_segment(q, res, res->n_tokens, last_frame);
    else if (!has_text && trailing >= svc->ep_no_speech_s)
        q->seg_frame = res->encoder_frames;
}

static char *partial_json(sess *q, const rnnt_result *res)
{
    const rnnt_model *m = eng_model(q->e);
    const rnnt_model_info *info = eng_info(q->e);
    char *text = rnnt_model_detokenize(m, res->tokens + q->seg_token, res->n_tokens - q->seg_token);
    json_t *doc = json_pack("{s:s, s:i, s:s, s:f}", "type", "partial", "segment", q->seg, "text", text ? text : "", "audio_s",
                            (double)rnnt_stream_frames_in(q->st) * info->frame_shift_s / info->subsampling);
    free(text);
    char *out = doc ? json_dumps(doc, REPLY_JSON_FLAGS) : NULL;
    json_decref(doc);
    return out;
}

/* Results after an advance: partial, endpoint finals, the last final. Returns 1 when the stream is
 * done (final sent, close asked). */
static int emit_results(sess *q, double t_in)
{
    strm_service *svc = q->s->streams;
    const rnnt_model_info *info = eng_info(q->e);
    rnnt_result res = {0};
    char err[200];
    if (rnnt_stream_get_result(q->st, &res, err, sizeof err)) return 0;
    if (res.status != RNNT_OK) {
        char *t = NULL;
        json_t *doc = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code", "numeric_error", "message",
                                "decoding produced non-finite values; the stream stops");
        if (doc) t = json_dumps(doc, REPLY_JSON_FLAGS);
        json_decref(doc);
        post_final(q, t);
        pthread_mutex_lock(&q->mu);
        q->close_code = WS_CLOSE_INTERNAL;
        snprintf(q->close_reason, sizeof q->close_reason, "numeric_error");
        pthread_mutex_unlock(&q->mu);
        rnnt_result_clear(&res);
        atomic_fetch_add(&svc->errors, 1);
        return 1;
    }
    int is_final = rnnt_stream_is_final(q->st);
    if (q->endpointing) endpoint(q, &res, is_final);
    if (is_final) {
        post_final(q, final_json(q, &res, res.n_tokens, res.encoder_frames, 1));
        atomic_fetch_add(&svc->finals, 1);
        double audio = (double)rnnt_stream_frames_in(q->st) * info->frame_shift_s / info->subsampling;
        if (audio > 0) strm_hist_add(&svc->rtf_hist, rtf_bounds, 10, q->compute_s / audio);
        pthread_mutex_lock(&q->mu);
        int drain = q->drain;
        q->close_code = drain ? WS_CLOSE_GOING_AWAY : WS_CLOSE_NORMAL;
        snprintf(q->close_reason, sizeof q->close_reason, drain ? "server shutting down" : "end of stream");
        pthread_mutex_unlock(&q->mu);
        rnnt_result_clear(&res);
        atomic_fetch_add(&svc->finished, 1);
        return 1;
    }
    if (q->partials && rnnt_stream_frames_in(q->st) > q->frames_last) {
        char *p = partial_json(q, &res);
        if (p) {
            pthread_mutex_lock(&q->mu);
            if (q->partial) atomic_fetch_add(&svc->partials_dropped, 1);
            free(q->partial);
            q->partial = p;
            q->partial_len = strlen(p);
            q->partial_t_in = t_in;
            pthread_mutex_unlock(&q->mu);
        }
    }
    q->frames_last = rnnt_stream_frames_in(q->st);
    rnnt_result_clear(&res);
    return 0;
}

static void worker_post_error(sess *q, unsigned close_code, const char *code, const char *message)
{
    json_t *doc = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code", code, "message", message);
    char *t = doc ? json_dumps(doc, REPLY_JSON_FLAGS) : NULL;
    json_decref(doc);
    post_final(q, t);
    pthread_mutex_lock(&q->mu);
    q->close_code = close_code;
    snprintf(q->close_reason, sizeof q->close_reason, "%s", code);
    pthread_mutex_unlock(&q->mu);
    atomic_fetch_add(&q->s->streams->errors, 1);
}

static void kick(sess *q)
{
    pthread_mutex_lock(&q->mu);
    if (q->conn) tp_kick(q->conn);
    pthread_mutex_unlock(&q->mu);
}

/* One tick of one worker. */
static void worker_tick(strm_worker *w)
{
    strm_service *svc = w->s->streams;
    pthread_mutex_lock(&w->mu);
    while (w->incoming) {
        sess *q = w->incoming;
        w->incoming = q->wnext;
        q->wnext = w->list;
        w->list = q;
    }
    pthread_mutex_unlock(&w->mu);
    int n_list = 0, drain_all = atomic_load(&svc->drain_all);
    for (sess *q = w->list; q; q = q->wnext) {
        n_list++;
        if (drain_all) {
            pthread_mutex_lock(&q->mu);
            q->drain = 1;
            pthread_mutex_unlock(&q->mu);
        }
    }
    if (!n_list) {
        worker_prune_models(w);
        return;
    }
    sess **ready = malloc(sizeof(sess *) * (size_t)n_list);
    double *t_in = malloc(sizeof(double) * (size_t)n_list);
    rnnt_stream **batch = malloc(sizeof(rnnt_stream *) * (size_t)n_list);
    sess **bsess = malloc(sizeof(sess *) * (size_t)n_list);
    if (!ready || !t_in || !batch || !bsess) goto out;
    int n_ready = 0;
    char err[256];
    /* Take input; drop streams that are gone. */
    for (sess **pp = &w->list; *pp;) {
        sess *q = *pp;
        pthread_mutex_lock(&q->mu);
        int gone = q->gone;
        pthread_mutex_unlock(&q->mu);
        if (gone || q->done) {
            if (gone) {
                *pp = q->wnext;
                pthread_mutex_lock(&w->mu);
                w->n--;
                pthread_mutex_unlock(&w->mu);
                strm_sess_unref(q);
                continue;
            }
            pp = &q->wnext;
            continue;
        }
        pp = &q->wnext;
        wmodel *wm = worker_model(w, q->e, err, sizeof err);
        if (!wm) {
            worker_post_error(q, WS_CLOSE_TRY_AGAIN, "no_runner", err);
            q->done = 1;
            kick(q);
            continue;
        }
        if (!q->st && rnnt_stream_create(eng_model(q->e), &q->st, err, sizeof err)) {
            worker_post_error(q, WS_CLOSE_TRY_AGAIN, "no_stream", err);
            q->done = 1;
            kick(q);
            continue;
        }
        unsigned char *in = NULL;
        size_t in_len = 0;
        double tin = 0;
        int eof, take = rnnt_stream_pending_frames(q->st) < 2 * STRM_RUNNER_FRAMES;
        pthread_mutex_lock(&q->mu);
        if (take && q->in_len) {
            in = q->in;
            in_len = q->in_len;
            tin = q->t_in;
            q->in = NULL;
            q->in_len = q->in_cap = 0;
        }
        eof = q->eof || q->drain;
        pthread_mutex_unlock(&q->mu);
        rnnt_status st = RNNT_OK;
        if (in_len) {
            if (q->enc == ENC_S16) st = rnnt_stream_accept_audio_s16(q->st, wm->fe, (const int16_t *)in, in_len / 2, err, sizeof err);
            else if (q->enc == ENC_F32) st = rnnt_stream_accept_audio_f32(q->st, wm->fe, (const float *)in, in_len / 4, err, sizeof err);
            else {
                int F = eng_info(q->e)->feature_dim;
                st = rnnt_stream_accept_features(q->st, (const float *)in, (int)(in_len / ((size_t)F * 4)), F, 0, err, sizeof err);
            }
            kick(q); /* the loop side may resume reading */
        }
        free(in);
        if (st != RNNT_OK) {
            worker_post_error(q, WS_CLOSE_INVALID_DATA, st == RNNT_ERR_TOO_LARGE ? "too_much_input" : "invalid_input", err);
            q->done = 1;
            kick(q);
            continue;
        }
        if (eof && !q->finished_sent && (!take || rnnt_stream_pending_frames(q->st) < 2 * STRM_RUNNER_FRAMES)) {
            pthread_mutex_lock(&q->mu);
            int all_taken = q->in_len == 0;
            pthread_mutex_unlock(&q->mu);
            if (all_taken || q->drain) {
                rnnt_stream_input_finished(q->st, err, sizeof err);
                q->finished_sent = 1;
            }
        }
        if (rnnt_stream_ready(q->st)) {
            t_in[n_ready] = tin > 0 ? tin : strm_now();
            ready[n_ready++] = q;
        }
    }
    /* Advance: one batch per model generation and max_batch streams. */
    for (int i = 0; i < n_ready;) {
        eng *e = ready[i]->e;
        wmodel *wm = worker_model(w, e, err, sizeof err);
        int nb = 0;
        for (int j = i; j < n_ready && nb < svc->max_batch; j++)
            if (ready[j] && ready[j]->e == e) {
                bsess[nb] = ready[j];
                batch[nb++] = ready[j]->st;
            }
        double t0 = strm_now();
        rnnt_status st = wm ? rnnt_runner_advance_streams(wm->r, nb, batch, NULL, err, sizeof err) : RNNT_ERR_NOMEM;
        double dt = strm_now() - t0;
        atomic_fetch_add(&svc->batches, 1);
        atomic_fetch_add(&svc->chunks, nb);
        strm_hist_add(&svc->batch_hist, batch_bounds, 9, nb);
        for (int k = 0; k < nb; k++) {
            sess *q = bsess[k];
            q->compute_s += dt / nb;
            int idx = -1;
            for (int j = i; j < n_ready; j++)
                if (ready[j] == q) idx = j;
            double tq = idx >= 0 ? t_in[idx] : strm_now();
            if (st != RNNT_OK) {
                worker_post_error(q, WS_CLOSE_INTERNAL, "engine_error", err);
                q->done = 1;
            } else if (emit_results(q, tq)) {
                q->done = 1;
            }
            kick(q);
            if (idx >= 0) ready[idx] = NULL;
        }
        while (i < n_ready && !ready[i]) i++;
    }
out:
    free(ready);
    free(t_in);
    free(batch);
    free(bsess);
    worker_prune_models(w);
}

void *strm_worker_main(void *arg)
{
    strm_worker *w = arg;
    strm_service *svc = w->s->streams;
    double next = strm_now();
    while (!atomic_load(&svc->stop)) {
        next += svc->tick_s;
        double wait = next - strm_now();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
        } else {
            next = strm_now(); /* behind: do not try to catch up ticks */
        }
        worker_tick(w);
    }
    return NULL;
}

