/* test_cli.c — rnnt-transcribe end to end: a golden model and its .npy inputs give the reference's
 * transcripts (plain and JSON); bad models, bad files and bad flags give one-line errors and the
 * documented exit codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <jansson.h>

#include "model.h"
#include "safetensors.h"
#include "test_util.h"

static const char *cli(void)
{
    const char *c = getenv("RNNT_CLI");
    if (!c) fail_msg("RNNT_CLI is not set");
    return c;
}

/* Runs a command, returns its exit status; stdout (and stderr, merged) into out. */
static int run(const char *cmd, char *out, size_t n)
{
    char full[8200];
    if (snprintf(full, sizeof full, "%s 2>&1", cmd) >= (int)sizeof full) fail_msg("command too long: %s", cmd);
    FILE *p = popen(full, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, n - 1, p);
    out[got] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static char out[1 << 16];

static void test_transcribes_golden(void **state)
{
    char dir[1024], cmd[8192], err[512];
    snprintf(dir, sizeof dir, "%s/golden/hard_bb", tu_data_dir());
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) fail_msg("%s", err);
    rnnt_st_file g;
    char gpath[1200];
    snprintf(gpath, sizeof gpath, "%s/golden.safetensors", dir);
    if (rnnt_st_open(gpath, &g, err, sizeof err)) fail_msg("%s", err);
    int checked = 0;
    for (int b = 0; b < 8; b++) {
        char name[64], npy[1200];
        snprintf(npy, sizeof npy, "%s/utt%d.npy", dir, b);
        FILE *f = fopen(npy, "rb");
        if (!f) break;
        fclose(f);
        snprintf(name, sizeof name, "utt%d.tokens", b);
        const rnnt_st_tensor *t = rnnt_st_find(&g, name);
        assert_non_null(t);
        int32_t tok[4096];
        assert_true(t->numel < 4096);
        if (rnnt_st_read_i32(&g, t, tok, err, sizeof err)) fail_msg("%s", err);
        char *want = rnnt_model_detokenize(m, (int *)tok, (int)t->numel);
        snprintf(cmd, sizeof cmd, "%s --model %s %s", cli(), dir, npy);
        assert_int_equal(run(cmd, out, sizeof out), 0);
        char line[4096];
        snprintf(line, sizeof line, "%s\t%s\n", npy, want);
        if (strcmp(out, line)) fail_msg("CLI printed\n%s\nexpected\n%s", out, line);
        snprintf(cmd, sizeof cmd, "%s --json --model %s %s", cli(), dir, npy);
        assert_int_equal(run(cmd, out, sizeof out), 0);
        assert_non_null(strstr(out, "\"tokens\":["));
        char frag[4096];
        snprintf(frag, sizeof frag, "\"text\":\"%s\"", want);
        if (!strstr(out, frag)) fail_msg("JSON output lacks %s:\n%s", frag, out);
        free(want);
        checked++;
    }
    assert_true(checked >= 3);
    /* several files at once, with a batch smaller than the file count */
    snprintf(cmd, sizeof cmd, "%s --batch 2 --model %s %s/utt0.npy %s/utt1.npy %s/utt2.npy", cli(), dir, dir, dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    int lines = 0;
    for (char *p = out; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 3);
    rnnt_st_close(&g);
    rnnt_model_free(m);
}

static void test_errors(void **state)
{
    char cmd[8192], dir[1024];
    snprintf(dir, sizeof dir, "%s/golden/hard_bb", tu_data_dir());
    snprintf(cmd, sizeof cmd, "%s", cli());
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "usage: rnnt-transcribe"));
    snprintf(cmd, sizeof cmd, "%s --model %s --batch 0 %s/utt0.npy", cli(), dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    snprintf(cmd, sizeof cmd, "%s --model %s --backend tpu %s/utt0.npy", cli(), dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "'tpu' is not auto, cpu or cuda"));
    snprintf(cmd, sizeof cmd, "%s --model /nonexistent %s/utt0.npy", cli(), dir);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "rnnt-transcribe: /nonexistent: No such file or directory"));
    /* a file that is not .npy, next to a good one: the good one is still transcribed */
    snprintf(cmd, sizeof cmd, "%s --model %s %s/model.yaml %s/utt1.npy", cli(), dir, dir, dir);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "model.yaml: neither a .npy feature file nor a recognised audio file"));
    assert_non_null(strstr(out, "utt1.npy\t"));
    /* features of another model's width */
    char other[1024];
    snprintf(other, sizeof other, "%s/golden/soft_plain", tu_data_dir());
    snprintf(cmd, sizeof cmd, "%s --model %s %s/utt1.npy", cli(), other, dir);
    int rc = run(cmd, out, sizeof out);
    rnnt_model *a, *b;
    char err[512];
    if (rnnt_model_load(dir, &a, err, sizeof err) || rnnt_model_load(other, &b, err, sizeof err)) fail_msg("%s", err);
    if (a->feature_dim != b->feature_dim) {
        assert_int_equal(rc, 1);
        assert_non_null(strstr(out, "features per frame, the model expects"));
    }
    rnnt_model_free(a);
    rnnt_model_free(b);
    snprintf(cmd, sizeof cmd, "%s --version", cli());
    assert_int_equal(run(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, RNNT_VERSION));
}


/* Audio files: the shipped model's sample WAV gives the transcript of its .npy; a stereo copy made here
 * (each sample twice) the same; JSON words, SRT and WebVTT; a truncated WAV fails alone. */
static void test_audio_and_formats(void **state)
{
    char model[1024], wav[1200], npy[1200], cmd[8192];
    snprintf(model, sizeof model, "%s/../../models/en-char-small", tu_data_dir());
    snprintf(wav, sizeof wav, "%s/samples/02-espeak-en-gb-x-rp-klatt.wav", model);
    snprintf(npy, sizeof npy, "%s/samples/02-espeak-en-gb-x-rp-klatt.npy", model);
    static char out2[1 << 16];
    snprintf(cmd, sizeof cmd, "%s --model %s %s", cli(), model, npy);
    assert_int_equal(run(cmd, out2, sizeof out2), 0);
    const char *want = strchr(out2, '\t');
    assert_non_null(want);
    assert_string_equal(want + 1, "for we are saved by hope\n");
    snprintf(cmd, sizeof cmd, "%s --model %s %s", cli(), model, wav);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    assert_non_null(strchr(out, '\t'));
    assert_string_equal(strchr(out, '\t'), want);
    /* a stereo WAV written here from the mono one: 44-byte header, each 16-bit sample twice */
    size_t len;
    char *mono = tu_read_file(wav, &len);
    assert_non_null(mono);
    assert_memory_equal(mono, "RIFF", 4);
    assert_memory_equal(mono + 36, "data", 4);
    uint32_t data;
    memcpy(&data, mono + 40, 4);
    assert_true(44 + (size_t)data <= len);
    size_t slen = 44 + 2 * (size_t)data;
    unsigned char *st = malloc(slen);
    memcpy(st, mono, 44);
    uint32_t u = (uint32_t)(slen - 8), d2 = 2 * data, rate;
    uint16_t ch = 2, align = 4;
    memcpy(&rate, mono + 24, 4);
    uint32_t bps = rate * 4;
    memcpy(st + 4, &u, 4);
    memcpy(st + 22, &ch, 2);
    memcpy(st + 28, &bps, 4);
    memcpy(st + 32, &align, 2);
    memcpy(st + 40, &d2, 4);
    for (size_t i = 0; i < data / 2; i++) {
        memcpy(st + 44 + 4 * i, mono + 44 + 2 * i, 2);
        memcpy(st + 46 + 4 * i, mono + 44 + 2 * i, 2);
    }
    char *dir = tu_tmpdir(), path[1200], trunc[1200];
    tu_write_file(dir, "stereo.wav", st, slen);
    tu_write_file(dir, "truncated.wav", mono, 30);
    snprintf(path, sizeof path, "%s/stereo.wav", dir);
    snprintf(trunc, sizeof trunc, "%s/truncated.wav", dir);
    snprintf(cmd, sizeof cmd, "%s --model %s %s", cli(), model, path);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    assert_string_equal(strchr(out, '\t'), want);
    /* a broken file among good ones: named in the error, the others still transcribed, exit 1 */
    snprintf(cmd, sizeof cmd, "%s --model %s %s %s", cli(), model, trunc, path);
    assert_int_equal(run(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "truncated.wav: cannot decode as wav"));
    assert_non_null(strstr(out, "stereo.wav\tfor we are saved by hope"));
    /* JSON: words with start <= end, in order, spelling the text */
    snprintf(cmd, sizeof cmd, "%s --model %s --format json %s", cli(), model, wav);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    json_error_t je;
    json_t *o = json_loads(out, 0, &je);
    if (!o) fail_msg("not JSON: %s: %s", je.text, out);
    json_t *words = json_object_get(o, "words");
    assert_true(json_is_array(words));
    assert_int_equal(json_array_size(words), 6);
    char joined[512] = "";
    double last_end = 0.0;
    for (size_t i = 0; i < json_array_size(words); i++) {
        json_t *w = json_array_get(words, i);
        double a = json_real_value(json_object_get(w, "start")), b = json_real_value(json_object_get(w, "end"));
        assert_true(a <= b);
        assert_true(a >= last_end - 1e-9);
        assert_true(b <= json_real_value(json_object_get(o, "duration_s")) + 1e-9);
        last_end = b;
        if (i) strcat(joined, " ");
        strcat(joined, json_string_value(json_object_get(w, "word")));
    }
    assert_string_equal(joined, json_string_value(json_object_get(o, "text")));
    json_decref(o);
    /* SRT and WebVTT */
    snprintf(cmd, sizeof cmd, "%s --model %s --format srt %s", cli(), model, wav);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    if (strncmp(out, "1\n00:00:0", 9) || !strstr(out, ",") || !strstr(out, " --> 00:00:0") || !strstr(out, "\nfor we are saved by hope\n"))
        fail_msg("SRT:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s --model %s --format vtt %s %s", cli(), model, wav, npy);
    assert_int_equal(run(cmd, out, sizeof out), 0);
    if (!strstr(out, "==> ") || !strstr(out, "<==\nWEBVTT\n\n00:00:0") || !strstr(out, ".") || !strstr(out, "\nfor we are saved by hope\n"))
        fail_msg("VTT:\n%s", out);
    snprintf(cmd, sizeof cmd, "%s --model %s --format xml %s", cli(), model, wav);
    assert_int_equal(run(cmd, out, sizeof out), 2);
    assert_non_null(strstr(out, "'xml' is not text, json, srt or vtt"));
    free(st);
    free(mono);
    tu_rmdir(dir);
}

/* The shipped model's samples: the CLI's transcript of each sample, from its .npy and from its WAV,
 * is samples.tsv's model_output column, so the table the quick start prints beside the references
 * (and the model card quotes) cannot drift from what the engine says. */
static void test_shipped_samples_as_listed(void **state)
{
    char model[1024], tsv[1200], cmd[8192], want[8192];
    snprintf(model, sizeof model, "%s/../../models/en-char-small", tu_data_dir());
    snprintf(tsv, sizeof tsv, "%s/samples/samples.tsv", model);
    size_t len;
    char *text = tu_read_file(tsv, &len);
    assert_non_null(text);
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    assert_non_null(line);
    assert_string_equal(line, "file\tengine\tvoice\taugmentation\treference\tmodel_output");
    int rows = 0;
    while ((line = strtok_r(NULL, "\n", &save))) {
        char *f[6], *c = line;   /* tab-separated; a field may be empty (a model may emit nothing) */
        int n = 0;
        while (n < 6) {
            f[n++] = c;
            if (!(c = strchr(c, '\t'))) break;
            *c++ = 0;
        }
        if (n != 6) fail_msg("samples.tsv row %d: %d fields", rows + 1, n);
        snprintf(cmd, sizeof cmd, "%s --model %s %s/samples/%s.npy %s/samples/%s.wav", cli(), model, model, f[0],
                 model, f[0]);
        assert_int_equal(run(cmd, out, sizeof out), 0);
        if (snprintf(want, sizeof want, "%s/samples/%s.npy\t%s\n%s/samples/%s.wav\t%s\n", model, f[0], f[5], model,
                     f[0], f[5]) >= (int)sizeof want)
            fail_msg("samples.tsv row %d is too long", rows + 1);
        if (strcmp(out, want)) fail_msg("%s: the CLI says\n%swhere samples.tsv says '%s'", f[0], out, f[5]);
        rows++;
    }
    assert_int_equal(rows, 4);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transcribes_golden),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_audio_and_formats),
        cmocka_unit_test(test_shipped_samples_as_listed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
