/* transcriptions.c — OpenAI-style form fields and answers (transcriptions.h). */
#include "transcriptions.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rnnt_words.h"

#define SEG_MAX_WORDS 12  /* as rnnt_subtitles' cues */
#define SEG_MAX_PAUSE_S 1.0

/* A text field's value as a C string (no NUL inside, at most OAI_FIELD_MAX bytes). */
static int field_text(const mp_part *p, char *out, size_t cap, srv_err *e)
{
    if (p->has_filename) {
        srv_err_set(e, 400, "invalid_request", "form field '%s' must be text, not a file", p->name);
        return -1;
    }
    if (p->len >= cap) {
        srv_err_set(e, 400, "invalid_request", "form field '%s' is longer than %zu bytes", p->name, cap - 1);
        return -1;
    }
    if (memchr(p->data, 0, p->len)) {
        srv_err_set(e, 400, "invalid_request", "form field '%s' contains a NUL byte", p->name);
        return -1;
    }
    memcpy(out, p->data, p->len);
    out[p->len] = 0;
    return 0;
}

static int language_ok(const char *v)
{
    if (!strcasecmp(v, "en") || !strcasecmp(v, "english")) return 1;
    /* en-US, en_GB, ... */
    return strlen(v) >= 4 && strlen(v) <= 8 && !strncasecmp(v, "en", 2) && (v[2] == '-' || v[2] == '_');
}

int oai_parse_form(const mp_part *parts, int n, const char *model_name, oai_request *o, srv_err *e)
{
    memset(o, 0, sizeof *o);
    char v[OAI_FIELD_MAX + 1];
    int seen_model = 0, seen_format = 0, seen_lang = 0, seen_prompt = 0, seen_temp = 0;
    for (int i = 0; i < n; i++) {
        const mp_part *p = &parts[i];
        const char *name = p->name;
        if (!strcmp(name, "file")) {
            if (o->file) {
                srv_err_set(e, 400, "multiple_files", "more than one 'file' part: send exactly one audio file");
                return -1;
            }
            o->file = p;
            continue;
        }
        if (p->has_filename) {
            srv_err_set(e, 400, "unexpected_file", "a file in form field '%.64s': the audio goes in the one field 'file'", name);
            return -1;
        }
        int *seen = !strcmp(name, "model")             ? &seen_model
                    : !strcmp(name, "response_format") ? &seen_format
                    : !strcmp(name, "language")        ? &seen_lang
                    : !strcmp(name, "prompt")          ? &seen_prompt
                    : !strcmp(name, "temperature")     ? &seen_temp
                                                       : NULL;
        int is_gran = !strcmp(name, "timestamp_granularities[]") || !strcmp(name, "timestamp_granularities");
        if (!seen && !is_gran) {
            srv_err_set(e, 400, "unknown_field",
                        "unknown form field '%.64s' (known: file, model, response_format, timestamp_granularities[], language, "
                        "prompt, temperature)",
                        name);
            return -1;
        }
        if (seen && (*seen)++) {
            srv_err_set(e, 400, "invalid_request", "form field '%s' given twice", name);
            return -1;
        }
        if (field_text(p, v, sizeof v, e)) return -1;
        if (!strcmp(name, "model")) {
            if (strcmp(v, model_name) != 0 && strcmp(v, OAI_MODEL_ALIAS) != 0) {
                srv_err_set(e, 400, "model_not_found", "model '%.64s' is not loaded (this server has '%.64s', also called '%s')", v,
                            model_name, OAI_MODEL_ALIAS);
                return -1;
            }
        } else if (!strcmp(name, "response_format")) {
            if (!strcmp(v, "json")) o->format = OAI_JSON;
            else if (!strcmp(v, "text")) o->format = OAI_TEXT;
            else if (!strcmp(v, "verbose_json")) o->format = OAI_VERBOSE_JSON;
            else if (!strcmp(v, "srt")) o->format = OAI_SRT;
            else if (!strcmp(v, "vtt")) o->format = OAI_VTT;
            else {
                srv_err_set(e, 400, "invalid_parameter", "response_format '%.32s' is not one of json, text, verbose_json, srt, vtt", v);
                return -1;
            }
        } else if (is_gran) {
            if (!strcmp(v, "word")) o->words = 1;
            else if (!strcmp(v, "segment")) o->segments = 1;
            else {
                srv_err_set(e, 400, "invalid_parameter", "timestamp_granularities[] '%.32s' is not word or segment", v);
                return -1;
            }
        } else if (!strcmp(name, "language")) {
            if (!language_ok(v)) {
                srv_err_set(e, 400, "unsupported_language", "language '%.32s': the model transcribes English only (en)", v);
                return -1;
            }
        } else if (!strcmp(name, "temperature")) {
            char *end = NULL;
            double t = strtod(v, &end);
            if (!v[0] || v[0] == ' ' || v[0] == '\t' || *end || !(t >= 0.0 && t <= 1.0)) {
                srv_err_set(e, 400, "invalid_parameter", "temperature must be a number in [0, 1] (it is ignored: decoding is greedy)");
                return -1;
            }
        }
        /* prompt: accepted, ignored */
    }
    if (!o->file) {
        srv_err_set(e, 400, "missing_file", "no 'file' part: send the audio as multipart/form-data field 'file'");
        return -1;
    }
    if (o->format == OAI_VERBOSE_JSON && !o->words && !o->segments) o->segments = 1;
    if ((o->words || o->segments) && o->format != OAI_VERBOSE_JSON) {
        srv_err_set(e, 400, "invalid_parameter", "timestamp_granularities[] needs response_format verbose_json");
        return -1;
    }
    return 0;
}

/* Segments: runs of at most SEG_MAX_WORDS words, split at pauses over SEG_MAX_PAUSE_S. */
static json_t *segments_json(const rnnt_result *res, const rnnt_word *w, int nw)
{
    json_t *segs = json_array();
    for (int i = 0, id = 0; segs && i < nw; id++) {
        int j = i + 1;
        while (j < nw && j - i < SEG_MAX_WORDS && w[j].start_s - w[j - 1].end_s <= SEG_MAX_PAUSE_S) j++;
        size_t tl = 0;
        for (int k = i; k < j; k++) tl += strlen(w[k].text) + 1;
        char *text = malloc(tl + 1);
        json_t *toks = json_array();
        if (!text || !toks) {
            free(text);
            json_decref(toks);
            json_decref(segs);
            return NULL;
        }
        text[0] = 0;
        size_t off = 0;
        for (int k = i; k < j; k++) {
            size_t n = strlen(w[k].text);
            if (k > i) text[off++] = ' ';
            memcpy(text + off, w[k].text, n);
            off += n;
        }
        text[off] = 0;
        int t0 = w[i].first_token, t1 = w[j - 1].first_token + w[j - 1].n_tokens;
        double lp = 0.0;
        for (int t = t0; t < t1; t++) {
            json_array_append_new(toks, json_integer(res->tokens[t]));
            if (res->probs) lp += log(res->probs[t] > 1e-30f ? (double)res->probs[t] : 1e-30);
        }
        json_t *seg = json_pack("{s:i, s:i, s:f, s:f, s:s, s:o, s:f, s:o, s:n, s:n}", "id", id, "seek", 0, "start", w[i].start_s,
                                "end", w[j - 1].end_s, "text", text, "tokens", toks, "temperature", 0.0, "avg_logprob",
                                res->probs && t1 > t0 ? json_real(lp / (t1 - t0)) : json_null(), "compression_ratio",
                                "no_speech_prob");
        free(text);
        if (!seg || json_array_append_new(segs, seg)) {
            json_decref(segs);
            return NULL;
        }
        i = j;
    }
    return segs;
}

int oai_render(const oai_request *o, const rnnt_model *m, const rnnt_result *res, double duration_s, char **body, size_t *len,
               const char **content_type, srv_err *e)
{
    const char *text = res->text ? res->text : "";
    *body = NULL;
    *len = 0;
    if (o->format == OAI_TEXT) {
        size_t n = strlen(text);
        if ((*body = malloc(n + 2))) {
            memcpy(*body, text, n);
            (*body)[n] = '\n';
            (*body)[n + 1] = 0;
            *len = n + 1;
        }
        *content_type = "text/plain; charset=utf-8";
    } else if (o->format == OAI_JSON) {
        json_t *doc = json_pack("{s:s}", "text", text);
        *body = doc ? json_dumps(doc, REPLY_JSON_FLAGS) : NULL;
        json_decref(doc);
        *content_type = "application/json";
    } else {
        rnnt_word *w = NULL;
        int nw = 0;
        char err[128];
        if (rnnt_result_words(m, res, &w, &nw, err, sizeof err) == RNNT_OK) {
            if (o->format == OAI_SRT || o->format == OAI_VTT) {
                *body = rnnt_subtitles(o->format == OAI_SRT ? RNNT_SUBS_SRT : RNNT_SUBS_VTT, w, nw, SEG_MAX_WORDS);
                *content_type = o->format == OAI_SRT ? "application/x-subrip; charset=utf-8" : "text/vtt; charset=utf-8";
            } else {
                json_t *doc = json_pack("{s:s, s:s, s:f, s:s}", "task", "transcribe", "language", "english", "duration", duration_s,
                                        "text", text);
                int ok = doc != NULL;
                if (ok && o->words) {
                    json_t *a = json_array();
                    for (int i = 0; a && i < nw; i++) {
                        json_t *x = json_pack("{s:s, s:f, s:f, s:o}", "word", w[i].text, "start", w[i].start_s, "end", w[i].end_s,
                                              "confidence", w[i].confidence >= 0 ? json_real(w[i].confidence) : json_null());
                        if (!x || json_array_append_new(a, x)) {
                            json_decref(a);
                            a = NULL;
                        }
                    }
                    ok = a && json_object_set_new(doc, "words", a) == 0;
                }
                if (ok && o->segments) {
                    json_t *s = segments_json(res, w, nw);
                    ok = s && json_object_set_new(doc, "segments", s) == 0;
                }
                *body = ok ? json_dumps(doc, REPLY_JSON_FLAGS) : NULL;
                json_decref(doc);
                *content_type = "application/json";
            }
            rnnt_words_free(w, nw);
        }
        if (*body) *len = strlen(*body);
    }
    if (!*body) {
        srv_err_set(e, 500, "internal", "could not build the response (out of memory?)");
        return -1;
    }
    if (o->format == OAI_JSON) *len = strlen(*body);
    return 0;
}
