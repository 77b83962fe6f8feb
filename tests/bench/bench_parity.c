/* bench_parity.c — backends against each other and against reference transcripts on real feature files:
 * the CPU engine (fp32), CUDA fp32 and CUDA fp16, each decoding the list in batches; reports how many
 * utterances are token-for-token identical to the CPU's (tokens and frames), each backend's WER against
 * the references, and whether CUDA fp16 depends on the batch (batch 1 vs the batch size).
 *
 *   bench_parity MODEL_DIR LIST.tsv [--batch 32]
 *
 * LIST.tsv: one utterance per line, "features.npy<TAB>reference text", paths relative to the list's
 * folder. Exit status 1 when CUDA fp32 differs from the CPU anywhere, 0 otherwise. */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rnnt_npy.h"
#include "rnnt.h"

#define MAX_UTT 4096

static int words(const char *s, char w[][48], int max)
{
    int n = 0;
    while (*s && n < max) {
        while (*s == ' ') s++;
        if (!*s) break;
        int k = 0;
        while (*s && *s != ' ') {
            if (k < 47) w[n][k++] = *s;
            s++;
        }
        w[n++][k] = 0;
    }
    return n;
}

/* word edit distance; *ref_words gets the reference length */
static int wer_errors(const char *hyp, const char *ref, int *ref_words)
{
    static char hw[512][48], rw[512][48];
    static int d[513][513];
    int nh = words(hyp, hw, 512), nr = words(ref, rw, 512);
    *ref_words = nr;
    for (int i = 0; i <= nr; i++) d[i][0] = i;
    for (int j = 0; j <= nh; j++) d[0][j] = j;
    for (int i = 1; i <= nr; i++)
        for (int j = 1; j <= nh; j++) {
            int sub = d[i - 1][j - 1] + (strcmp(rw[i - 1], hw[j - 1]) != 0);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[nr][nh];
}

static int decode_all(const rnnt_model *m, rnnt_backend_kind kind, rnnt_precision prec, int batch, int n,
                      const rnnt_input *in, int max_frames, rnnt_result *res)
{
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = kind;
    p.precision = prec;
    p.max_batch = batch;
    p.max_frames = max_frames;
    char err[512];
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) {
        fprintf(stderr, "runner: %s\n", err);
        return 1;
    }
    for (int i = 0; i < n; i += batch) {
        int nb = n - i < batch ? n - i : batch;
        if (rnnt_runner_decode(r, nb, in + i, res + i, NULL, err, sizeof err)) {
            fprintf(stderr, "decode: %s\n", err);
            return 1;
        }
    }
    rnnt_runner_free(r);
    return 0;
}

static int same(const rnnt_result *a, const rnnt_result *b)
{
    return a->status == b->status && a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, 4 * (size_t)a->n_tokens) &&
           !memcmp(a->frames, b->frames, 4 * (size_t)a->n_tokens);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR LIST.tsv [--batch 32]\n", argv[0]);
        return 2;
    }
    int batch = argc > 4 && !strcmp(argv[3], "--batch") ? atoi(argv[4]) : 32;
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(argv[1], &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    char *listdup = strdup(argv[2]), *base = dirname(listdup);
    static rnnt_input in[MAX_UTT];
    static char *ref[MAX_UTT];
    static rnnt_npy feats[MAX_UTT];
    int n = 0, max_frames = 1;
    char line[8192];
    while (n < MAX_UTT && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = 0;
        char path[8192 + 256];
        snprintf(path, sizeof path, "%s/%s", base, line);
        if (rnnt_npy_load(path, rnnt_model_get_info(m)->feature_dim, 1000000, (size_t)1 << 30, &feats[n], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        in[n] = (rnnt_input){feats[n].data, feats[n].rows, 1}; /* read by the .npy reader, which checks finiteness */
        ref[n] = strdup(tab + 1);
        if (feats[n].rows > max_frames) max_frames = feats[n].rows;
        n++;
    }
    fclose(f);
    static rnnt_result cpu[MAX_UTT], g32[MAX_UTT], g16[MAX_UTT], g16one[MAX_UTT];
    if (decode_all(m, RNNT_BACKEND_CPU, RNNT_PRECISION_FP32, batch, n, in, max_frames, cpu) ||
        decode_all(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP32, batch, n, in, max_frames, g32) ||
        decode_all(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP16, batch, n, in, max_frames, g16) ||
        decode_all(m, RNNT_BACKEND_CUDA, RNNT_PRECISION_FP16, 1, n, in, max_frames, g16one))
        return 1;
    int s32 = 0, s16 = 0, inv = 0;
    long e_cpu = 0, e32 = 0, e16 = 0, nw = 0;
    for (int i = 0; i < n; i++) {
        int w;
        s32 += same(&g32[i], &cpu[i]);
        s16 += same(&g16[i], &cpu[i]);
        inv += same(&g16one[i], &g16[i]);
        e_cpu += wer_errors(cpu[i].text ? cpu[i].text : "", ref[i], &w);
        nw += w;
        e32 += wer_errors(g32[i].text ? g32[i].text : "", ref[i], &w);
        e16 += wer_errors(g16[i].text ? g16[i].text : "", ref[i], &w);
    }
    printf("model %s, %d utterances (%s), %ld reference words, batches of %d\n\n", argv[1], n, argv[2], nw, batch);
    printf("| backend | identical to the CPU (tokens and frames) | WER |\n|---|---|---|\n");
    printf("| CPU fp32 | - | %.2f%% |\n", 100.0 * e_cpu / (nw ? nw : 1));
    printf("| CUDA fp32 | %d/%d | %.2f%% |\n", s32, n, 100.0 * e32 / (nw ? nw : 1));
    printf("| CUDA fp16 | %d/%d (%.1f%%) | %.2f%% |\n", s16, n, 100.0 * s16 / n, 100.0 * e16 / (nw ? nw : 1));
    printf("\nCUDA fp16 WER - CPU WER = %+.2f points; CUDA fp16 batch 1 vs batch %d: %d/%d identical\n",
           100.0 * (e16 - e_cpu) / (nw ? nw : 1), batch, inv, n);
    return s32 == n && inv == n ? 0 : 1;
}
