/* test_loader.c — the model loader accepts a well-formed directory (F32, F16 and BF16 weights) and
 * rejects every malformed one with a message that names the file, line and key. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model.h"
#include "test_util.h"

static char *replace(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    char *out = malloc(strlen(text) + strlen(to) + 1);
    assert_non_null(out);
    size_t pre = (size_t)(at - text);
    memcpy(out, text, pre);
    strcpy(out + pre, to);
    strcat(out, at + strlen(from));
    return out;
}

static void yaml_edit(const char *dir, const char *from, const char *to)
{
    char *y = replace(tu_small_yaml, from, to);
    tu_write_file(dir, "model.yaml", y, strlen(y));
    free(y);
}

static void write_tensors_edited(const char *dir, void (*edit)(tu_tensor *t, int *n))
{
    tu_tensor *t;
    int n = tu_small_tensors(7, &t);
    tu_tensor *copy = calloc((size_t)n + 1, sizeof *copy);
    memcpy(copy, t, (size_t)n * sizeof *t);
    int m = n;
    edit(copy, &m);
    char path[4096];
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    tu_write_safetensors(path, copy, m);
    free(copy);
    tu_free_tensors(t, n);
}

static int find(tu_tensor *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return i;
    fail_msg("no tensor %s", name);
    return -1;
}

/* ---- the mutations ------------------------------------------------------------------------- */
static void m_unknown_key(const char *d) { yaml_edit(d, "max_symbols: 3\n", "max_symbols: 3\nbogus: 1\n"); }
static void m_unknown_nested(const char *d) { yaml_edit(d, "{input: 20, hidden: 9}", "{input: 20, hidden: 9, dropout: 0.1}"); }
static void m_duplicate_key(const char *d) { yaml_edit(d, "vocab_size: 4\n", "vocab_size: 4\nvocab_size: 4\n"); }
static void m_syntax(const char *d) { yaml_edit(d, "joint:\n  dim: 8\n", "joint:\n  dim: [8\n"); }
static void m_format(const char *d) { yaml_edit(d, "format: rnntd", "format: onnx"); }
static void m_version(const char *d) { yaml_edit(d, "version: 1", "version: 2"); }
static void m_not_int(const char *d) { yaml_edit(d, "hidden: 9}", "hidden: nine}"); }
static void m_zero(const char *d) { yaml_edit(d, "hidden: 9}", "hidden: 0}"); }
static void m_quoted_int(const char *d) { yaml_edit(d, "dim: 8", "dim: \"8\""); }
static void m_input_mismatch(const char *d) { yaml_edit(d, "{input: 12,", "{input: 13,"); }
static void m_chain_mismatch(const char *d) { yaml_edit(d, "{input: 20, hidden: 9}", "{input: 10, hidden: 9}"); }
static void m_dup_duration(const char *d) { yaml_edit(d, "[2, 3]", "[2, 2]"); }
static void m_short_duration(const char *d) { yaml_edit(d, "[2, 3]", "[1, 3]"); }
static void m_feature_dim(const char *d) { yaml_edit(d, "feature_dim: 6", "feature_dim: 7"); }
static void m_missing_key(const char *d) { yaml_edit(d, "vocab_size: 4\n", ""); }
static void m_activation(const char *d) { yaml_edit(d, "lstm_activation: hard", "lstm_activation: relu"); }
/* projection LSTMs and LayerNorm (NeMo's RNNEncoder) */
static void m_proj_too_big(const char *d) { yaml_edit(d, "{input: 20, hidden: 9}", "{input: 20, hidden: 9, proj: 9}"); }
static void m_proj_no_weight(const char *d) { yaml_edit(d, "{input: 20, hidden: 9}", "{input: 20, hidden: 9, proj: 8}"); }
static void m_proj_chain(const char *d) { yaml_edit(d, "{input: 12, hidden: 10, time_stack: 2}", "{input: 12, hidden: 10, time_stack: 2, proj: 6}"); }
static void m_norm_no_weight(const char *d) { yaml_edit(d, "{input: 20, hidden: 9}", "{input: 20, hidden: 9, layer_norm: true}"); }
static void m_norm_not_bool(const char *d) { yaml_edit(d, "{input: 20, hidden: 9}", "{input: 20, hidden: 9, layer_norm: 1}"); }
static void m_pred_proj(const char *d) { yaml_edit(d, "{input: 5, hidden: 7}", "{input: 5, hidden: 7, proj: 3}"); }
static void m_tail(const char *d) { yaml_edit(d, "max_symbols: 3\n", "max_symbols: 3\nstacking_tail: cut\n"); }
static void m_last_stack(const char *d) { yaml_edit(d, "{input: 20, hidden: 9}", "{input: 20, hidden: 9, time_stack: 2}"); }
static void m_root_list(const char *d) { tu_write_file(d, "model.yaml", "- 1\n- 2\n", 8); }
static void m_empty_yaml(const char *d) { tu_write_file(d, "model.yaml", "", 0); }
static void m_fmax(const char *d) { yaml_edit(d, "f_max: 8000.0", "f_max: 9000.0"); }
static void m_no_yaml(const char *d)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/model.yaml", d);
    unlink(p);
}
static void m_tokens_count(const char *d) { tu_write_file(d, "tokens.txt", "a\nb\nc\n", 6); }
static void m_tokens_dup(const char *d) { tu_write_file(d, "tokens.txt", "x\na\nb\na\n", 8); }
static void m_tokens_cr(const char *d) { tu_write_file(d, "tokens.txt", "x\r\na\nb\nc\n", 9); }
static void m_tokens_empty(const char *d) { tu_write_file(d, "tokens.txt", "x\n\nb\nc\n", 7); }
static void m_tokens_space(const char *d) { tu_write_file(d, "tokens.txt", " \na\nb\nc\n", 8); }

static void e_drop_last(tu_tensor *t, int *n) { (*n)--; }
static void e_extra(tu_tensor *t, int *n)
{
    static const float one = 1.0f;
    t[*n] = (tu_tensor){"joint.extra", "F32", 1, {1}, &one, 4};
    (*n)++;
}
static void e_shape(tu_tensor *t, int *n)
{
    int i = find(t, *n, "joint.enc.weight"); /* [8, 9] -> [9, 8]: same bytes, wrong shape */
    t[i].shape[0] = 9;
    t[i].shape[1] = 8;
}
static void e_dtype(tu_tensor *t, int *n) { t[find(t, *n, "joint.out.bias")].dtype = "I32"; }
static float nan_buf[40], inf_buf[7], neg_std[6];
static void e_nan(tu_tensor *t, int *n)
{
    int i = find(t, *n, "encoder.lstm.0.bias_ih");
    memcpy(nan_buf, t[i].data, sizeof nan_buf);
    nan_buf[17] = NAN;
    t[i].data = nan_buf;
}
static void e_inf(tu_tensor *t, int *n)
{
    int i = find(t, *n, "joint.out.bias");
    memcpy(inf_buf, t[i].data, sizeof inf_buf);
    inf_buf[3] = -INFINITY;
    t[i].data = inf_buf;
}
static void e_std(tu_tensor *t, int *n)
{
    int i = find(t, *n, "frontend.std");
    memcpy(neg_std, t[i].data, sizeof neg_std);
    neg_std[2] = 0.0f;
    t[i].data = neg_std;
}
static void m_weights(const char *d, void (*e)(tu_tensor *, int *)) { write_tensors_edited(d, e); }
static void m_missing_tensor(const char *d) { m_weights(d, e_drop_last); }
static void m_extra_tensor(const char *d) { m_weights(d, e_extra); }
static void m_wrong_shape(const char *d) { m_weights(d, e_shape); }
static void m_wrong_dtype(const char *d) { m_weights(d, e_dtype); }
static void m_nan(const char *d) { m_weights(d, e_nan); }
static void m_inf(const char *d) { m_weights(d, e_inf); }
static void m_std(const char *d) { m_weights(d, e_std); }

/* Hostile safetensors files, written byte by byte. */
static void st_raw(const char *d, const char *header, size_t data_len)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/weights.safetensors", d);
    void *data = calloc(1, data_len ? data_len : 1);
    tu_write_safetensors_raw(p, header, data, data_len);
    free(data);
}
static void m_truncated(const char *d)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/weights.safetensors", d);
    size_t len;
    char *buf = tu_read_file(p, &len);
    tu_write_file(d, "weights.safetensors", buf, len - 100);
    free(buf);
}
static void m_short_file(const char *d) { tu_write_file(d, "weights.safetensors", "abc", 3); }
static void m_huge_header(const char *d) { tu_write_file(d, "weights.safetensors", "\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10); }
static void m_header_past_end(const char *d) { tu_write_file(d, "weights.safetensors", "\x00\x10\x00\x00\x00\x00\x00\x00{}", 10); }
static void m_not_json(const char *d) { st_raw(d, "{\"a\": [1, 2", 0); }
static void m_json_dup(const char *d)
{
    st_raw(d, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
}
static void m_overlap(const char *d)
{
    st_raw(d, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
}
static void m_gap(const char *d)
{
    st_raw(d, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12);
}
static void m_offsets_outside(const char *d) { st_raw(d, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8); }
static void m_size_mismatch(const char *d) { st_raw(d, "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8); }
static void m_bad_dtype(const char *d) { st_raw(d, "{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8); }
static void m_shape_overflow(const char *d)
{
    st_raw(d, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776,1099511627776],\"data_offsets\":[0,8]}}", 8);
}
static void m_negative_offset(const char *d) { st_raw(d, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4); }

typedef struct {
    const char *what;
    void (*mutate)(const char *dir);
    const char *expect[3]; /* substrings the message must contain */
} bad_case;

static const bad_case cases[] = {
    {"unknown top-level key", m_unknown_key, {"model.yaml:33:1:", "bogus: unknown key"}},
    {"unknown nested key", m_unknown_nested, {"model.yaml:22:", "encoder.layers[1].dropout: unknown key"}},
    {"duplicate key", m_duplicate_key, {"model.yaml:31:1:", "vocab_size: duplicate key"}},
    {"YAML syntax error", m_syntax, {"model.yaml:", "YAML syntax error"}},
    {"wrong format", m_format, {"model.yaml:1:9:", "format: 'onnx' is not one of: rnntd"}},
    {"unknown version", m_version, {"model.yaml:2:10:", "version: 2 is not supported"}},
    {"non-integer size", m_not_int, {"model.yaml:22:", "encoder.layers[1].hidden: expected an integer, got 'nine'"}},
    {"zero size", m_zero, {"model.yaml:22:", "encoder.layers[1].hidden: 0 is out of range"}},
    {"quoted number", m_quoted_int, {"model.yaml:28:8:", "joint.dim: expected an integer"}},
    {"first layer input", m_input_mismatch, {"encoder.layers[0].input: 13, expected feature_dim * frame_stacking = 12"}},
    {"layer chain", m_chain_mismatch, {"encoder.layers[1].input: 10, expected 20"}},
    {"repeated duration", m_dup_duration, {"model.yaml:31:", "big_blank_durations[1]: 2 repeats big_blank_durations[0]"}},
    {"duration below 2", m_short_duration, {"big_blank_durations[0]: 1 is out of range [2, 1000]"}},
    {"feature_dim vs n_mels", m_feature_dim, {"model.yaml:16:", "feature_dim: 7 differs from frontend.n_mels 6"}},
    {"missing key", m_missing_key, {"model.yaml:", "vocab_size: required key is missing"}},
    {"bad activation", m_activation, {"model.yaml:18:", "lstm_activation: 'relu' is not one of: hard, soft"}},
    {"time stack on last layer", m_last_stack, {"encoder.layers[1].time_stack: the last layer cannot stack time"}},
    {"proj not below hidden", m_proj_too_big, {"model.yaml:22:", "encoder.layers[1].proj: 9, must be smaller than hidden 9"}},
    {"proj without weight_hr", m_proj_no_weight, {"weights.safetensors:", "encoder.lstm.1.weight_hh' has shape [36, 9], expected [36, 8]"}},
    {"proj breaks the chain", m_proj_chain, {"encoder.layers[1].input: 20, expected 12 (proj 6 x time_stack 2 of layer 0)"}},
    {"layer_norm without weights", m_norm_no_weight, {"missing tensor 'encoder.lstm.1.norm.weight'"}},
    {"layer_norm not a boolean", m_norm_not_bool, {"model.yaml:22:", "encoder.layers[1].layer_norm"}},
    {"proj in the predictor", m_pred_proj, {"predictor.layers[0].proj: unknown key"}},
    {"bad stacking_tail", m_tail, {"model.yaml:33:", "stacking_tail: 'cut' is not one of: pad, drop"}},
    {"root is a list", m_root_list, {"model.yaml:1:1:", "top level must be a mapping"}},
    {"empty model.yaml", m_empty_yaml, {"model.yaml:1:1: the file is empty"}},
    {"f_max above Nyquist", m_fmax, {"frontend.f_max: need f_min < f_max <= sample_rate/2"}},
    {"no model.yaml", m_no_yaml, {"model.yaml: cannot open"}},
    {"token count", m_tokens_count, {"tokens.txt: 3 tokens, but model.yaml says vocab_size 4"}},
    {"duplicate token", m_tokens_dup, {"tokens.txt:4: token 'a' repeats line 2"}},
    {"carriage return", m_tokens_cr, {"tokens.txt:1: token contains a carriage return"}},
    {"empty token", m_tokens_empty, {"tokens.txt:2: empty token"}},
    {"space token", m_tokens_space, {"tokens.txt:1: token contains a space"}},
    {"missing tensor", m_missing_tensor, {"weights.safetensors: missing tensor 'joint.out.bias'"}},
    {"extra tensor", m_extra_tensor, {"unexpected tensor 'joint.extra'"}},
    {"wrong shape", m_wrong_shape, {"tensor 'joint.enc.weight' has shape [9, 8], expected [8, 9]"}},
    {"wrong dtype", m_wrong_dtype, {"tensor 'joint.out.bias' has dtype I32"}},
    {"NaN weight", m_nan, {"tensor 'encoder.lstm.0.bias_ih' has a non-finite value (NaN) at flat index 17"}},
    {"Inf weight", m_inf, {"tensor 'joint.out.bias' has a non-finite value (Inf) at flat index 3"}},
    {"std not positive", m_std, {"tensor 'frontend.std'[2] = 0, must be > 0"}},
    {"truncated weights", m_truncated, {"weights.safetensors:", "truncated"}},
    {"file shorter than a header", m_short_file, {"too short for a safetensors header"}},
    {"absurd header length", m_huge_header, {"header length", "is not in [2,"}},
    {"header past the end", m_header_past_end, {"runs past the end"}},
    {"header not JSON", m_not_json, {"header is not valid JSON"}},
    {"duplicate tensor name", m_json_dup, {"header is not valid JSON", "duplicate"}},
    {"overlapping tensors", m_overlap, {"overlaps another tensor"}},
    {"gap between tensors", m_gap, {"4 unaccounted bytes before tensor 'b'"}},
    {"offsets outside the file", m_offsets_outside, {"lie outside the data area"}},
    {"shape and offsets disagree", m_size_mismatch, {"shape and offsets disagree"}},
    {"unsupported dtype", m_bad_dtype, {"unsupported dtype 'F64'"}},
    {"shape overflow", m_shape_overflow, {"tensor 'a':", "shape"}},
    {"negative offset", m_negative_offset, {"data_offsets [-4, 0] lie outside"}},
};

static void test_bad_models(void **state)
{
    int n = (int)(sizeof cases / sizeof cases[0]);
    assert_true(n >= 20);
    for (int i = 0; i < n; i++) {
        char *dir = tu_tmpdir();
        tu_write_small_model(dir, 7, NULL);
        cases[i].mutate(dir);
        rnnt_model *m = NULL;
        char err[512] = "";
        rnnt_status st = rnnt_model_load(dir, &m, err, sizeof err);
        if (st == RNNT_OK) fail_msg("case '%s': the loader accepted it", cases[i].what);
        assert_null(m);
        for (int k = 0; k < 3 && cases[i].expect[k]; k++)
            if (!strstr(err, cases[i].expect[k])) fail_msg("case '%s': message\n  %s\nlacks\n  %s", cases[i].what, err, cases[i].expect[k]);
        assert_null(strchr(err, '\n'));
        tu_rmdir(dir);
    }
}

static void test_not_a_directory(void **state)
{
    char err[256];
    rnnt_model *m;
    assert_int_equal(rnnt_model_load("/nonexistent/model", &m, err, sizeof err), RNNT_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/model: No such file or directory"));
    char *dir = tu_tmpdir();
    tu_write_file(dir, "file", "x", 1);
    char p[4096];
    snprintf(p, sizeof p, "%s/file", dir);
    assert_int_equal(rnnt_model_load(p, &m, err, sizeof err), RNNT_ERR_INVALID);
    assert_non_null(strstr(err, "not a directory"));
    assert_int_equal(rnnt_model_load("", &m, err, sizeof err), RNNT_ERR_INVALID);
    tu_rmdir(dir);
}

static uint16_t to_half(float f)
{
    /* Exact for the values used here (multiples of 1/1024 in [-1, 1]). */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = (x >> 13) & 0x3ff;
    if ((x & 0x7fffffff) == 0) return (uint16_t)sign;
    return (uint16_t)(sign | (uint32_t)exp << 10 | mant);
}

static void test_good_model_and_half_weights(void **state)
{
    char *dir = tu_tmpdir();
    tu_write_small_model(dir, 3, NULL);
    rnnt_model *m;
    char err[512];
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    const rnnt_model_info *info = rnnt_model_get_info(m);
    assert_string_equal(info->name, "unit-small");
    assert_int_equal(info->feature_dim, 6);
    assert_int_equal(info->subsampling, 4);
    assert_int_equal(info->vocab_size, 4);
    assert_int_equal(info->n_big_blanks, 2);
    assert_int_equal(info->big_blank_durations[1], 3);
    assert_int_equal(m->blank, 6);
    assert_int_equal(rnnt_big_blank_duration(m, 5), 2);
    assert_int_equal(rnnt_big_blank_duration(m, 4), 3);
    assert_int_equal(rnnt_big_blank_duration(m, 6), 0);
    assert_int_equal(rnnt_model_encoder_frames(m, 0), 0);
    assert_int_equal(rnnt_model_encoder_frames(m, 1), 1);
    assert_int_equal(rnnt_model_encoder_frames(m, 4), 1);
    assert_int_equal(rnnt_model_encoder_frames(m, 5), 2);
    assert_true(info->frame_shift_s > 0.04 - 1e-12 && info->frame_shift_s < 0.04 + 1e-12);
    /* the folded bias */
    assert_float_equal(m->enc[0].bias[5], m->enc[0].b_ih[5] + m->enc[0].b_hh[5], 0);
    int toks[] = {1, 0, 0, 2, 3, 0};
    char *text = rnnt_model_detokenize(m, toks, 6);
    assert_string_equal(text, "a bc");
    free(text);
    rnnt_model_free(m);

    /* F16 and BF16 tensors are converted at load. */
    tu_tensor *t;
    int n = tu_small_tensors(3, &t);
    uint16_t half[56], bf[8];
    float want_half[56];
    for (int i = 0; i < 56; i++) {
        want_half[i] = (float)((i % 17) - 8) / 1024.0f;
        half[i] = to_half(want_half[i]);
    }
    float bf_vals[8] = {1.0f, -2.0f, 0.5f, 0.0f, 3.0f, -0.25f, 8.0f, 1.5f};
    for (int i = 0; i < 8; i++) {
        uint32_t x;
        memcpy(&x, &bf_vals[i], 4);
        bf[i] = (uint16_t)(x >> 16);
    }
    int w = find(t, n, "joint.out.weight"), b = find(t, n, "joint.enc.bias");
    void *save_w = (void *)t[w].data, *save_b = (void *)t[b].data;
    t[w] = (tu_tensor){"joint.out.weight", "F16", 2, {7, 8}, half, 112};
    t[b] = (tu_tensor){"joint.enc.bias", "BF16", 1, {8}, bf, 16};
    char path[4096];
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    tu_write_safetensors(path, t, n);
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    for (int i = 0; i < 56; i++) assert_float_equal(m->joint_out_w[i], want_half[i], 0);
    for (int i = 0; i < 8; i++) assert_float_equal(m->joint_enc_b[i], bf_vals[i], 0);
    rnnt_model_free(m);
    t[w].data = save_w;
    t[b].data = save_b;
    tu_free_tensors(t, n);
    tu_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_models),
        cmocka_unit_test(test_not_a_directory),
        cmocka_unit_test(test_good_model_and_half_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
