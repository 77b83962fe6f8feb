/* model_load.c — reads a model directory (FORMAT.md) into an rnnt_model, validating everything and
 * naming the file, line and key of the first thing that is wrong. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "safetensors.h"
#include "yaml_doc.h"

#define MAX_SIZE 16384
#define MAX_LAYERS 32
#define MAX_TOKEN_BYTES 64
#define MAX_TOKENS_FILE (8u << 20)

/* ---- model.yaml ---------------------------------------------------------------------------- */

typedef struct {
    int n;
    int input[MAX_LAYERS], hidden[MAX_LAYERS], time_stack[MAX_LAYERS];
    int proj[MAX_LAYERS], layer_norm[MAX_LAYERS];
} layer_spec;

static int spec_out(const layer_spec *s, int l) { return s->proj[l] ? s->proj[l] : s->hidden[l]; }

static rnnt_status read_layers(ydoc *y, yaml_node_t *parent, const char *where, int allow_stack, layer_spec *out)
{
    char path[96];
    snprintf(path, sizeof path, "%s.layers", where);
    yaml_node_t *seq = ydoc_get(y, parent, "layers");
    if (!seq) return ydoc_error(y, parent, RNNT_ERR_FORMAT, "%s: required key is missing", path);
    if (seq->type != YAML_SEQUENCE_NODE) return ydoc_error(y, seq, RNNT_ERR_FORMAT, "%s: expected a list of layers", path);
    int n = (int)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n < 1 || n > MAX_LAYERS) return ydoc_error(y, seq, RNNT_ERR_FORMAT, "%s: %d layers, expected 1 to %d", path, n, MAX_LAYERS);
    static const char *const keys_stack[] = {"input", "hidden", "time_stack", "proj", "layer_norm", NULL};
    static const char *const keys_plain[] = {"input", "hidden", NULL};
    out->n = n;
    for (int l = 0; l < n; l++) {
        yaml_node_t *m = yaml_document_get_node(&y->doc, seq->data.sequence.items.start[l]);
        char w[112];
        snprintf(w, sizeof w, "%s[%d]", path, l);
        rnnt_status st;
        if ((st = ydoc_check_keys(y, m, w, allow_stack ? keys_stack : keys_plain))) return st;
        long long in = 0, hid = 0, ts = 1;
        if ((st = ydoc_int(y, m, w, "input", 1, 1, MAX_SIZE, &in)) || (st = ydoc_int(y, m, w, "hidden", 1, 1, MAX_SIZE, &hid)))
            return st;
        if (allow_stack && (st = ydoc_int(y, m, w, "time_stack", 0, 1, 16, &ts))) return st;
        long long proj = 0;
        int ln = 0;
        /* encoder layers only (allow_stack): projection LSTMs and LayerNorm, NeMo's RNNEncoder */
        if (allow_stack && (st = ydoc_int(y, m, w, "proj", 0, 1, MAX_SIZE, &proj))) return st;
        if (proj >= hid)
            return ydoc_error(y, ydoc_get(y, m, "proj"), RNNT_ERR_FORMAT, "%s.proj: %lld, must be smaller than hidden %lld", w, proj, hid);
        if (allow_stack && (st = ydoc_bool(y, m, w, "layer_norm", 0, &ln))) return st;
        out->input[l] = (int)in;
        out->hidden[l] = (int)hid;
        out->time_stack[l] = (int)ts;
        out->proj[l] = (int)proj;
        out->layer_norm[l] = ln;
    }
    return RNNT_OK;
}

static rnnt_status read_frontend(ydoc *y, yaml_node_t *root, rnnt_frontend_cfg *fe)
{
    static const char *const keys[] = {"sample_rate", "preemphasis", "dither", "window", "win_length", "hop_length", "n_fft",
                                       "center", "power", "n_mels", "f_min", "f_max", "mel_scale", "mel_norm", "log_floor",
                                       "normalize", "pad_mode", "log_guard", "spectrum_offset", "length", NULL};
    static const char *const windows[] = {"hann", "hamming", "povey", NULL};
    static const char *const scales[] = {"slaney", "htk", NULL};
    static const char *const norms[] = {"slaney", "none", NULL};
    static const char *const normalize[] = {"none", "global", "per_feature", "per_feature_stacked", NULL};
    static const char *const pad_modes[] = {"reflect", "constant", NULL};
    static const char *const guards[] = {"max", "add", NULL};
    static const char *const lengths[] = {"frames", "hop_ceil", NULL};
    yaml_node_t *m = ydoc_get(y, root, "frontend");
    if (!m) return ydoc_error(y, root, RNNT_ERR_FORMAT, "frontend: required key is missing");
    rnnt_status st;
    if ((st = ydoc_check_keys(y, m, "frontend", keys))) return st;
    long long sr, win, hop, nfft, mels;
    char nz[24], pad[16] = "reflect", guard[8] = "max", len[16] = "frames";
    fe->spectrum_offset = 0.0;
    fe->preemphasis = 0.0;
    fe->dither = 0.0;
    fe->power = 2.0;
    fe->center = 0;
    strcpy(fe->mel_norm, "slaney");
    if ((st = ydoc_int(y, m, "frontend", "sample_rate", 1, 1000, 384000, &sr)) ||
        (st = ydoc_double(y, m, "frontend", "preemphasis", 0, 0.0, 1.0, &fe->preemphasis)) ||
        (st = ydoc_double(y, m, "frontend", "dither", 0, 0.0, 1e3, &fe->dither)) ||
        (st = ydoc_str(y, m, "frontend", "window", 1, windows, fe->window, sizeof fe->window)) ||
        (st = ydoc_int(y, m, "frontend", "win_length", 1, 1, 1 << 16, &win)) ||
        (st = ydoc_int(y, m, "frontend", "hop_length", 1, 1, 1 << 16, &hop)) ||
        (st = ydoc_int(y, m, "frontend", "n_fft", 1, 1, 1 << 17, &nfft)) ||
        (st = ydoc_bool(y, m, "frontend", "center", 0, &fe->center)) ||
        (st = ydoc_double(y, m, "frontend", "power", 0, 0.5, 4.0, &fe->power)) ||
        (st = ydoc_int(y, m, "frontend", "n_mels", 1, 1, 4096, &mels)) ||
        (st = ydoc_double(y, m, "frontend", "f_min", 1, 0.0, 1e6, &fe->f_min)) ||
        (st = ydoc_double(y, m, "frontend", "f_max", 1, 0.0, 1e6, &fe->f_max)) ||
        (st = ydoc_str(y, m, "frontend", "mel_scale", 1, scales, fe->mel_scale, sizeof fe->mel_scale)) ||
        (st = ydoc_str(y, m, "frontend", "mel_norm", 0, norms, fe->mel_norm, sizeof fe->mel_norm)) ||
        (st = ydoc_double(y, m, "frontend", "log_floor", 1, 1e-30, 1.0, &fe->log_floor)) ||
        (st = ydoc_str(y, m, "frontend", "normalize", 1, normalize, nz, sizeof nz)) ||
        (st = ydoc_str(y, m, "frontend", "pad_mode", 0, pad_modes, pad, sizeof pad)) ||
        (st = ydoc_str(y, m, "frontend", "log_guard", 0, guards, guard, sizeof guard)) ||
        (st = ydoc_double(y, m, "frontend", "spectrum_offset", 0, 0.0, 1.0, &fe->spectrum_offset)) ||
        (st = ydoc_str(y, m, "frontend", "length", 0, lengths, len, sizeof len)))
        return st;
    fe->sample_rate = (int)sr;
    fe->win_length = (int)win;
    fe->hop_length = (int)hop;
    fe->n_fft = (int)nfft;
    fe->n_mels = (int)mels;
    fe->normalize = !strcmp(nz, "global")                ? RNNT_NORM_GLOBAL
                    : !strcmp(nz, "per_feature")         ? RNNT_NORM_PER_FEATURE
                    : !strcmp(nz, "per_feature_stacked") ? RNNT_NORM_PER_FEATURE_STACKED
                                                         : RNNT_NORM_NONE;
    fe->pad_reflect = !strcmp(pad, "reflect");
    fe->log_add = !strcmp(guard, "add");
    fe->length_hop_ceil = !strcmp(len, "hop_ceil");
    /* pad_mode only means something with center: true; saying it otherwise is a mistake in the file. */
    if (!fe->center && ydoc_get(y, m, "pad_mode"))
        return ydoc_error(y, ydoc_get(y, m, "pad_mode"), RNNT_ERR_FORMAT, "frontend.pad_mode: only allowed with center: true");
    if (nfft < win) return ydoc_error(y, ydoc_get(y, m, "n_fft"), RNNT_ERR_FORMAT, "frontend.n_fft: %lld is smaller than win_length %lld", nfft, win);
    if (hop > win) return ydoc_error(y, ydoc_get(y, m, "hop_length"), RNNT_ERR_FORMAT, "frontend.hop_length: %lld is larger than win_length %lld", hop, win);
    if (!(fe->f_min < fe->f_max) || fe->f_max > sr / 2.0)
        return ydoc_error(y, ydoc_get(y, m, "f_max"), RNNT_ERR_FORMAT, "frontend.f_max: need f_min < f_max <= sample_rate/2");
    return RNNT_OK;
}

static rnnt_status read_yaml(struct rnnt_model *m, const char *path, layer_spec *enc, layer_spec *pred, char *err, size_t errlen)
{
    static const char *const keys[] = {"format", "version", "name", "frontend", "feature_dim", "frame_stacking", "lstm_activation",
                                       "encoder", "predictor", "joint", "vocab_size", "big_blank_durations", "max_symbols",
                                       "stacking_tail", NULL};
    static const char *const tails[] = {"pad", "drop", NULL};
    static const char *const fmt[] = {"rnntd", NULL};
    static const char *const acts[] = {"hard", "soft", NULL};
    static const char *const jacts[] = {"relu", "tanh", NULL};
    ydoc y;
    rnnt_status st = ydoc_load(&y, path, err, errlen);
    if (st) { ydoc_free(&y); return st; }
    yaml_node_t *root = ydoc_root(&y), *n;
    char buf[16];
    long long version, fdim, stack, vocab, maxsym, edim, jdim;
    if ((st = ydoc_check_keys(&y, root, "", keys)) || (st = ydoc_str(&y, root, "", "format", 1, fmt, buf, sizeof buf)) ||
        (st = ydoc_int(&y, root, "", "version", 1, 1, 1000000, &version)))
        goto out;
    if (version != 1) {
        st = ydoc_error(&y, ydoc_get(&y, root, "version"), RNNT_ERR_FORMAT, "version: %lld is not supported (this reader knows 1)", version);
        goto out;
    }
    if ((st = ydoc_str(&y, root, "", "name", 1, NULL, m->name, 65))) goto out;
    for (const char *c = m->name; *c; c++)
        if (!(*c == '.' || *c == '_' || *c == '-' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z'))) {
            st = ydoc_error(&y, ydoc_get(&y, root, "name"), RNNT_ERR_FORMAT, "name: only letters, digits, '.', '_' and '-' are allowed");
            goto out;
        }
    if (!m->name[0]) { st = ydoc_error(&y, ydoc_get(&y, root, "name"), RNNT_ERR_FORMAT, "name: must not be empty"); goto out; }
    if ((st = read_frontend(&y, root, &m->fe))) goto out;
    if ((st = ydoc_int(&y, root, "", "feature_dim", 1, 1, 4096, &fdim)) || (st = ydoc_int(&y, root, "", "frame_stacking", 1, 1, 16, &stack)) ||
        (st = ydoc_str(&y, root, "", "lstm_activation", 1, acts, buf, sizeof buf)))
        goto out;
    m->act = !strcmp(buf, "hard") ? RNNT_ACT_HARD : RNNT_ACT_SOFT;
    if (fdim != m->fe.n_mels) {
        st = ydoc_error(&y, ydoc_get(&y, root, "feature_dim"), RNNT_ERR_FORMAT, "feature_dim: %lld differs from frontend.n_mels %d", fdim, m->fe.n_mels);
        goto out;
    }
    m->feature_dim = (int)fdim;
    m->stacking = (int)stack;
    m->fe.stacking = (int)stack;
    char tail[8] = "pad";
    if ((st = ydoc_str(&y, root, "", "stacking_tail", 0, tails, tail, sizeof tail))) goto out;
    m->stacking_drop = !strcmp(tail, "drop");
    if (m->stacking_drop && m->fe.length_hop_ceil) {
        st = ydoc_error(&y, ydoc_get(&y, root, "stacking_tail"), RNNT_ERR_FORMAT, "stacking_tail: drop can not be combined with frontend.length: hop_ceil");
        goto out;
    }

    static const char *const enc_keys[] = {"layers", NULL}, *const pred_keys[] = {"embedding", "layers", NULL},
                             *const joint_keys[] = {"dim", "activation", NULL};
    if (!(n = ydoc_get(&y, root, "encoder"))) { st = ydoc_error(&y, root, RNNT_ERR_FORMAT, "encoder: required key is missing"); goto out; }
    if ((st = ydoc_check_keys(&y, n, "encoder", enc_keys)) || (st = read_layers(&y, n, "encoder", 1, enc))) goto out;
    if (enc->input[0] != fdim * stack) {
        st = ydoc_error(&y, ydoc_get(&y, n, "layers"), RNNT_ERR_FORMAT, "encoder.layers[0].input: %d, expected feature_dim * frame_stacking = %lld",
                        enc->input[0], fdim * stack);
        goto out;
    }
    for (int l = 1; l < enc->n; l++)
        if (enc->input[l] != spec_out(enc, l - 1) * enc->time_stack[l - 1]) {
            st = ydoc_error(&y, ydoc_get(&y, n, "layers"), RNNT_ERR_FORMAT, "encoder.layers[%d].input: %d, expected %d (%s %d x time_stack %d of layer %d)",
                            l, enc->input[l], spec_out(enc, l - 1) * enc->time_stack[l - 1], enc->proj[l - 1] ? "proj" : "hidden",
                            spec_out(enc, l - 1), enc->time_stack[l - 1], l - 1);
            goto out;
        }
    if (enc->time_stack[enc->n - 1] != 1) {
        st = ydoc_error(&y, ydoc_get(&y, n, "layers"), RNNT_ERR_FORMAT, "encoder.layers[%d].time_stack: the last layer cannot stack time", enc->n - 1);
        goto out;
    }
    if (!(n = ydoc_get(&y, root, "predictor"))) { st = ydoc_error(&y, root, RNNT_ERR_FORMAT, "predictor: required key is missing"); goto out; }
    if ((st = ydoc_check_keys(&y, n, "predictor", pred_keys)) || (st = ydoc_int(&y, n, "predictor", "embedding", 1, 1, MAX_SIZE, &edim)) ||
        (st = read_layers(&y, n, "predictor", 0, pred)))
        goto out;
    for (int l = 0; l < pred->n; l++)
        if (pred->input[l] != (l ? pred->hidden[l - 1] : edim)) {
            st = ydoc_error(&y, ydoc_get(&y, n, "layers"), RNNT_ERR_FORMAT, "predictor.layers[%d].input: %d, expected %lld", l, pred->input[l],
                            l ? (long long)pred->hidden[l - 1] : edim);
            goto out;
        }
    m->embed_dim = (int)edim;
    if (!(n = ydoc_get(&y, root, "joint"))) { st = ydoc_error(&y, root, RNNT_ERR_FORMAT, "joint: required key is missing"); goto out; }
    if ((st = ydoc_check_keys(&y, n, "joint", joint_keys)) || (st = ydoc_int(&y, n, "joint", "dim", 1, 1, MAX_SIZE, &jdim)) ||
        (st = ydoc_str(&y, n, "joint", "activation", 1, jacts, buf, sizeof buf)))
        goto out;
    m->joint_dim = (int)jdim;
    m->joint_act = !strcmp(buf, "relu") ? RNNT_JOINT_RELU : RNNT_JOINT_TANH;
    if ((st = ydoc_int(&y, root, "", "vocab_size", 1, 1, 65536, &vocab)) || (st = ydoc_int(&y, root, "", "max_symbols", 1, 1, 1000, &maxsym)))
        goto out;
    m->vocab = (int)vocab;
    m->max_symbols = (int)maxsym;
    if (!(n = ydoc_get(&y, root, "big_blank_durations"))) {
        st = ydoc_error(&y, root, RNNT_ERR_FORMAT, "big_blank_durations: required key is missing (use [] for none)");
        goto out;
    }
    if (n->type != YAML_SEQUENCE_NODE) { st = ydoc_error(&y, n, RNNT_ERR_FORMAT, "big_blank_durations: expected a list of integers"); goto out; }
    int nb = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (nb > RNNT_MAX_BIG_BLANKS) {
        st = ydoc_error(&y, n, RNNT_ERR_FORMAT, "big_blank_durations: %d durations, at most %d", nb, RNNT_MAX_BIG_BLANKS);
        goto out;
    }
    for (int i = 0; i < nb; i++) {
        yaml_node_t *d = yaml_document_get_node(&y.doc, n->data.sequence.items.start[i]);
        long long v;
        if (d->type != YAML_SCALAR_NODE || ydoc_parse_int((const char *)d->data.scalar.value, &v)) {
            st = ydoc_error(&y, d, RNNT_ERR_FORMAT, "big_blank_durations[%d]: expected an integer", i);
            goto out;
        }
        if (v < 2 || v > 1000) {
            st = ydoc_error(&y, d, RNNT_ERR_FORMAT, "big_blank_durations[%d]: %lld is out of range [2, 1000]", i, v);
            goto out;
        }
        for (int j = 0; j < i; j++)
            if (m->durations[j] == v) {
                st = ydoc_error(&y, d, RNNT_ERR_FORMAT, "big_blank_durations[%d]: %lld repeats big_blank_durations[%d]", i, v, j);
                goto out;
            }
        m->durations[i] = (int)v;
    }
    m->n_big = nb;
out:
    ydoc_free(&y);
    return st;
}

/* ---- tokens.txt ---------------------------------------------------------------------------- */

static rnnt_status read_tokens(struct rnnt_model *m, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(MAX_TOKENS_FILE + 1);
    if (!buf) { fclose(f); return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path); }
    size_t len = fread(buf, 1, MAX_TOKENS_FILE + 1, f);
    fclose(f);
    rnnt_status st = RNNT_OK;
    if (len > MAX_TOKENS_FILE) { st = rnnt_set_err(err, errlen, RNNT_ERR_TOO_LARGE, "%s: larger than %u bytes", path, MAX_TOKENS_FILE); goto out; }
    m->tokens = calloc((size_t)m->vocab, sizeof *m->tokens);
    if (!m->tokens) { st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path); goto out; }
    size_t pos = 0;
    int line = 0;
    while (pos < len) {
        size_t e = pos;
        while (e < len && buf[e] != '\n') e++;
        size_t tl = e - pos;
        if (line >= m->vocab) {
            st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s:%d: more tokens than vocab_size %d", path, line + 1, m->vocab);
            goto out;
        }
        if (tl == 0) { st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s:%d: empty token", path, line + 1); goto out; }
        if (tl > MAX_TOKEN_BYTES) {
            st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s:%d: token longer than %d bytes", path, line + 1, MAX_TOKEN_BYTES);
            goto out;
        }
        for (size_t i = pos; i < e; i++) {
            unsigned char ch = (unsigned char)buf[i];
            if (ch < 0x20 || ch == 0x7f || ch == ' ') {
                st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s:%d: token contains %s (byte 0x%02x); write a space as U+2581", path,
                                  line + 1, ch == '\r' ? "a carriage return" : ch == ' ' ? "a space" : "a control character", ch);
                goto out;
            }
        }
        if (!(m->tokens[line] = strndup(buf + pos, tl))) { st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path); goto out; }
        for (int j = 0; j < line; j++)
            if (!strcmp(m->tokens[j], m->tokens[line])) {
                st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s:%d: token '%s' repeats line %d", path, line + 1, m->tokens[line], j + 1);
                goto out;
            }
        line++;
        pos = e + 1;
    }
    if (line != m->vocab)
        st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: %d tokens, but model.yaml says vocab_size %d", path, line, m->vocab);
out:
    free(buf);
    return st;
}

/* ---- weights.safetensors ------------------------------------------------------------------- */

typedef struct {
    char name[64];
    int ndim;
    int64_t shape[2];
    const float **dst;
    int positive; /* every value must be > 0 */
} want;

static void add_want(want *w, int *n, const char *name, int64_t d0, int64_t d1, const float **dst)
{
    snprintf(w[*n].name, sizeof w[*n].name, "%s", name);
    w[*n].ndim = d1 ? 2 : 1;
    w[*n].shape[0] = d0;
    w[*n].shape[1] = d1;
    w[*n].dst = dst;
    w[*n].positive = 0;
    (*n)++;
}

static void add_lstm_wants(want *w, int *n, const char *prefix, rnnt_lstm_layer *L, const int *layer_norm, int nl)
{
    char name[64];
    for (int l = 0; l < nl; l++) {
        int H4 = 4 * L[l].hidden, R = rnnt_lstm_out(&L[l]);
        snprintf(name, sizeof name, "%s.%d.weight_ih", prefix, l);
        add_want(w, n, name, H4, L[l].input, &L[l].w_ih);
        snprintf(name, sizeof name, "%s.%d.weight_hh", prefix, l);
        add_want(w, n, name, H4, R, &L[l].w_hh);
        snprintf(name, sizeof name, "%s.%d.bias_ih", prefix, l);
        add_want(w, n, name, H4, 0, &L[l].b_ih);
        snprintf(name, sizeof name, "%s.%d.bias_hh", prefix, l);
        add_want(w, n, name, H4, 0, &L[l].b_hh);
        if (L[l].proj) {
            snprintf(name, sizeof name, "%s.%d.weight_hr", prefix, l);
            add_want(w, n, name, R, L[l].hidden, &L[l].w_hr);
        }
        if (layer_norm && layer_norm[l]) {
            snprintf(name, sizeof name, "%s.%d.norm.weight", prefix, l);
            add_want(w, n, name, R, 0, &L[l].ln_w);
            snprintf(name, sizeof name, "%s.%d.norm.bias", prefix, l);
            add_want(w, n, name, R, 0, &L[l].ln_b);
        }
    }
}

static void shape_str(char *buf, size_t n, int nd, const int64_t *s)
{
    size_t p = 0;
    p += (size_t)snprintf(buf + p, n - p, "[");
    for (int i = 0; i < nd && p < n; i++) p += (size_t)snprintf(buf + p, n - p, "%s%lld", i ? ", " : "", (long long)s[i]);
    if (p < n) snprintf(buf + p, n - p, "]");
}

static rnnt_status read_weights(struct rnnt_model *m, const char *path, const int *enc_layer_norm, char *err, size_t errlen)
{
    int max_w = 2 /* frontend */ + 1 /* embedding */ + 6 /* joint */ + 7 * m->n_enc + 4 * m->n_pred;
    want *w = calloc((size_t)max_w, sizeof *w);
    if (!w) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: out of memory", path);
    int nw = 0;
    int F = m->feature_dim, He = rnnt_lstm_out(&m->enc[m->n_enc - 1]), Hp = m->pred[m->n_pred - 1].hidden, J = m->joint_dim;
    if (m->fe.normalize == RNNT_NORM_GLOBAL) {
        add_want(w, &nw, "frontend.mean", F, 0, &m->fe_mean);
        add_want(w, &nw, "frontend.std", F, 0, &m->fe_std);
        w[nw - 1].positive = 1;
    }
    add_lstm_wants(w, &nw, "encoder.lstm", m->enc, enc_layer_norm, m->n_enc);
    add_want(w, &nw, "predictor.embedding", m->vocab + 1, m->embed_dim, &m->embedding);
    add_lstm_wants(w, &nw, "predictor.lstm", m->pred, NULL, m->n_pred);
    add_want(w, &nw, "joint.enc.weight", J, He, &m->joint_enc_w);
    add_want(w, &nw, "joint.enc.bias", J, 0, &m->joint_enc_b);
    add_want(w, &nw, "joint.pred.weight", J, Hp, &m->joint_pred_w);
    add_want(w, &nw, "joint.pred.bias", J, 0, &m->joint_pred_b);
    add_want(w, &nw, "joint.out.weight", m->n_out, J, &m->joint_out_w);
    add_want(w, &nw, "joint.out.bias", m->n_out, 0, &m->joint_out_b);

    rnnt_st_file f;
    rnnt_status st = rnnt_st_open(path, &f, err, errlen);
    if (st) { free(w); return st; }
    /* Every tensor in the file must be wanted, and every wanted one present with its exact shape. */
    for (int i = 0; i < f.n; i++) {
        int known = 0;
        for (int j = 0; j < nw; j++)
            if (!strcmp(f.tensors[i].name, w[j].name)) known = 1;
        if (!known) {
            st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: unexpected tensor '%s' (not part of this architecture)", path, f.tensors[i].name);
            goto out;
        }
    }
    size_t total = 0;
    for (int j = 0; j < nw; j++) {
        const rnnt_st_tensor *t = rnnt_st_find(&f, w[j].name);
        char want_s[64], got_s[96];
        if (!t) { st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: missing tensor '%s'", path, w[j].name); goto out; }
        if (t->dtype != RNNT_ST_F32 && t->dtype != RNNT_ST_F16 && t->dtype != RNNT_ST_BF16) {
            st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s' has dtype %s, expected F32, F16 or BF16", path, w[j].name,
                              rnnt_st_dtype_name(t->dtype));
            goto out;
        }
        if (t->ndim != w[j].ndim || t->shape[0] != w[j].shape[0] || (w[j].ndim == 2 && t->shape[1] != w[j].shape[1])) {
            shape_str(want_s, sizeof want_s, w[j].ndim, w[j].shape);
            shape_str(got_s, sizeof got_s, t->ndim, t->shape);
            st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected %s", path, w[j].name, got_s, want_s);
            goto out;
        }
        total += (size_t)t->numel;
    }
    /* One arena: the weights, then the folded LSTM biases. */
    size_t bias_floats = 0;
    for (int l = 0; l < m->n_enc; l++) bias_floats += 4 * (size_t)m->enc[l].hidden;
    for (int l = 0; l < m->n_pred; l++) bias_floats += 4 * (size_t)m->pred[l].hidden;
    m->arena_floats = total + bias_floats;
    m->arena = malloc(m->arena_floats * sizeof(float));
    if (!m->arena) { st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "%s: cannot allocate %zu weights", path, m->arena_floats); goto out; }
    float *p = m->arena;
    for (int j = 0; j < nw; j++) {
        const rnnt_st_tensor *t = rnnt_st_find(&f, w[j].name);
        if ((st = rnnt_st_read_f32(&f, t, p, err, errlen))) goto out;
        if (w[j].positive)
            for (int64_t i = 0; i < t->numel; i++)
                if (!(p[i] > 0.0f)) {
                    st = rnnt_set_err(err, errlen, RNNT_ERR_FORMAT, "%s: tensor '%s'[%lld] = %g, must be > 0", path, w[j].name, (long long)i, p[i]);
                    goto out;
                }
        *w[j].dst = p;
        p += t->numel;
    }
    rnnt_lstm_layer *stacks[2] = {m->enc, m->pred};
    int counts[2] = {m->n_enc, m->n_pred};
    for (int s = 0; s < 2; s++)
        for (int l = 0; l < counts[s]; l++) {
            rnnt_lstm_layer *L = &stacks[s][l];
            for (int i = 0; i < 4 * L->hidden; i++) p[i] = L->b_ih[i] + L->b_hh[i];
            L->bias = p;
            p += 4 * L->hidden;
        }
out:
    rnnt_st_close(&f);
    free(w);
    return st;
}

/* ---- the model ----------------------------------------------------------------------------- */

void rnnt_model_free(rnnt_model *m)
{
    if (!m) return;
    if (m->tokens)
        for (int i = 0; i < m->vocab; i++) free(m->tokens[i]);
    free(m->tokens);
    free(m->enc);
    free(m->pred);
    free(m->arena);
    free(m);
}

static rnnt_status join_path(char *out, size_t n, const char *dir, const char *file, char *err, size_t errlen)
{
    if ((size_t)snprintf(out, n, "%s/%s", dir, file) >= n)
        return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s: path too long", dir);
    return RNNT_OK;
}

rnnt_status rnnt_model_load(const char *dir, rnnt_model **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!dir || !*dir) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "no model directory given");
    struct stat sb;
    if (stat(dir, &sb)) return rnnt_set_err(err, errlen, RNNT_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return rnnt_set_err(err, errlen, RNNT_ERR_INVALID, "%s: not a directory (a model is a directory)", dir);
    struct rnnt_model *m = calloc(1, sizeof *m);
    if (!m) return rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory");
    char path[4096];
    layer_spec enc, pred;
    rnnt_status st;
    if ((st = join_path(path, sizeof path, dir, "model.yaml", err, errlen)) || (st = read_yaml(m, path, &enc, &pred, err, errlen))) goto fail;
    m->n_enc = enc.n;
    m->n_pred = pred.n;
    m->enc = calloc((size_t)enc.n, sizeof *m->enc);
    m->pred = calloc((size_t)pred.n, sizeof *m->pred);
    if (!m->enc || !m->pred) { st = rnnt_set_err(err, errlen, RNNT_ERR_NOMEM, "out of memory"); goto fail; }
    for (int l = 0; l < enc.n; l++)
        m->enc[l] = (rnnt_lstm_layer){.input = enc.input[l], .hidden = enc.hidden[l], .time_stack = enc.time_stack[l], .proj = enc.proj[l]};
    for (int l = 0; l < pred.n; l++) m->pred[l] = (rnnt_lstm_layer){.input = pred.input[l], .hidden = pred.hidden[l], .time_stack = 1};
    m->n_out = m->vocab + m->n_big + 1;
    m->blank = m->vocab + m->n_big;
    if ((st = join_path(path, sizeof path, dir, "tokens.txt", err, errlen)) || (st = read_tokens(m, path, err, errlen))) goto fail;
    if ((st = join_path(path, sizeof path, dir, "weights.safetensors", err, errlen)) || (st = read_weights(m, path, enc.layer_norm, err, errlen))) goto fail;

    rnnt_model_info *I = &m->info;
    I->name = m->name;
    I->feature_dim = m->feature_dim;
    I->frame_stacking = m->stacking;
    I->subsampling = m->stacking;
    for (int l = 0; l < m->n_enc; l++) I->subsampling *= m->enc[l].time_stack;
    I->sample_rate = m->fe.sample_rate;
    I->hop_length = m->fe.hop_length;
    I->frame_shift_s = (double)I->subsampling * m->fe.hop_length / m->fe.sample_rate;
    I->vocab_size = m->vocab;
    I->n_big_blanks = m->n_big;
    I->big_blank_durations = m->durations;
    I->max_symbols = m->max_symbols;
    I->lstm_activation = m->act;
    I->n_encoder_layers = m->n_enc;
    I->encoder_hidden = rnnt_lstm_out(&m->enc[m->n_enc - 1]);
    I->n_predictor_layers = m->n_pred;
    I->predictor_hidden = m->pred[m->n_pred - 1].hidden;
    I->joint_dim = m->joint_dim;
    size_t bias_floats = 0;
    for (int l = 0; l < m->n_enc; l++) bias_floats += 4 * (size_t)m->enc[l].hidden;
    for (int l = 0; l < m->n_pred; l++) bias_floats += 4 * (size_t)m->pred[l].hidden;
    I->n_parameters = (long long)(m->arena_floats - bias_floats);
    *out = m;
    return RNNT_OK;
fail:
    rnnt_model_free(m);
    return st;
}

const rnnt_model_info *rnnt_model_get_info(const rnnt_model *m) { return &m->info; }

const char *rnnt_model_token(const rnnt_model *m, int id) { return id >= 0 && id < m->vocab ? m->tokens[id] : NULL; }

int rnnt_model_encoder_frames(const rnnt_model *m, int frames)
{
    int t = m->stacking_drop ? frames / m->stacking : rnnt_stacked_len(frames, m->stacking);
    for (int l = 0; l < m->n_enc; l++) t = rnnt_stacked_len(t, m->enc[l].time_stack);
    return t;
}

char *rnnt_model_detokenize(const rnnt_model *m, const int *tokens, int n)
{
    static const char boundary[] = "\xe2\x96\x81"; /* U+2581 */
    size_t cap = 1;
    for (int i = 0; i < n; i++) cap += strlen(m->tokens[tokens[i]]) + 1;
    char *s = malloc(cap), *o = s;
    if (!s) return NULL;
    int pending_space = 0;
    for (int i = 0; i < n; i++) {
        const char *t = m->tokens[tokens[i]];
        while (*t) {
            if (!strncmp(t, boundary, 3)) {
                pending_space = 1;
                t += 3;
                continue;
            }
            if (pending_space && o > s) *o++ = ' ';
            pending_space = 0;
            *o++ = *t++;
        }
    }
    *o = 0;
    return s;
}
