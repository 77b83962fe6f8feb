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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transcribes_golden),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
