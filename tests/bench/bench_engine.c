/* bench_engine.c — the whole engine through the public API on a model directory: audio seconds decoded
 * per second (RTFx) for batches of equal-length utterances, the time split, and multi-blank decoding
 * against the same model with its big blanks switched off.
 *
 *   bench_engine MODEL_DIR [--backend cuda|cpu] [--precision fp16|fp32] [--batches 1,32,256]
 *                [--seconds 10] [--reps 5] [--workers 1,2] [--extras 0] [--audio 1] [--async 1]
 *                [--max-batch N]
 *
 * Inputs: random features whose normalised values are N(0, 1) (what the random models' output biases
 * were calibrated on), a fresh utterance per batch slot. A decode is timed from the call to
 * rnnt_runner_decode to its return (upload, encoder, decoding, results, text), median of --reps after
 * two warm-ups. RTFx = batch * seconds / that time.
 * The split comes from a second runner with RNNT_CUDA_DECODE=profile (the same kernels, launched from
 * the host with events between phases: it adds a sync per step, so only its shares are meaningful).
 * "Big blanks off" sets the big-blank output biases to -1e30 before creating a runner: the same model
 * decoded as a plain RNN-T (every blank moves one frame).
 * --extras 0 leaves out the time split and the big-blanks-off runs.
 * --workers W (W > 1): W runners on the same device, each decoding in its own thread as the daemon's
 * workers do, so one worker's host work (staging, results) overlaps another's GPU work; aggregate
 * RTFx = W * reps * batch * seconds / the wall time of all reps (after two warm-ups each).
 * --audio 1: instead, the engine from audio against the engine from features of the same utterances:
 * random PCM (white noise under a slowly varying envelope, plus a few tones: a full spectrum, no
 * silence), its features by the CPU frontend; per batch one runner decodes, round-robin per rep, the
 * features (rnnt_runner_decode), the float PCM and the 16-bit PCM (rnnt_runner_decode_audio; on CUDA
 * the frontend runs on the GPU), median wall time of each, the frontend's own time (GPU time of its
 * kernels) and its share of the audio call, bytes sent per batch, and how many utterances decoded
 * from audio give the same tokens as from the CPU's features.
 * --async 1: per batch size, one runner and one thread decoding reps batches back to back, first with
 * rnnt_runner_decode (each call waits), then with rnnt_runner_submit / rnnt_runner_collect keeping two
 * batches in flight (batch k + 1 staged while batch k runs), alternating the two 3 times; per mode the
 * wall time per batch (median of the 3 rounds; from the first call to the last batch's completion,
 * over reps + 1) and the difference, the host time hidden; the steady state of each mode: the time per batch from
 * the first batch's completion to the last's, over reps (so without the pipeline's fill: the first batch's staging
 * and its latency, which a long offline run such as MLPerf's amortises; a runner that decodes at submit, the CPU's,
 * has none: there it is the whole figure); the tokens of every batch are checked
 * equal between the modes, and the device memory the runner took (cudaMemGetInfo's use after the rounds less before it was made) per
 * utterance it holds.
 * --max-batch N: every runner holds N utterances whatever its batch size (the daemon's runners hold
 * batching.max_batch and decode smaller batches; an fp16 runner of max_batch <= 32 takes the
 * persistent recurrence, a larger one per-step GEMMs). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return ((rng >> 11) + 0.5) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    double wall, rtfx;
    rnnt_timing tm; /* of the median run */
    double labels, steps, skipped; /* per utterance */
} run_stats;

static int run(const rnnt_model *m, rnnt_runner_params p, int B, int frames, int reps, float **feats, run_stats *out,
               const char *env_decode)
{
    char err[512];
    if (env_decode) setenv("RNNT_CUDA_DECODE", env_decode, 1);
    rnnt_runner *r;
    rnnt_status st = rnnt_runner_create(m, &p, &r, err, sizeof err);
    if (env_decode) unsetenv("RNNT_CUDA_DECODE");
    if (st) {
        fprintf(stderr, "runner: %s\n", err);
        return 1;
    }
    rnnt_input *in = calloc((size_t)B, sizeof *in);
    rnnt_result *res = calloc((size_t)B, sizeof *res);
    double *t = calloc((size_t)reps, sizeof *t);
    rnnt_timing *tm = calloc((size_t)reps, sizeof *tm);
    /* finite by construction; the daemon and the CLI also vouch (their parsers check as they read) */
    for (int b = 0; b < B; b++) in[b] = (rnnt_input){feats[b], frames, 1};
    for (int i = 0; i < 2 + reps; i++) {
        rnnt_timing x;
        double t0 = now_s();
        if (rnnt_runner_decode(r, B, in, res, &x, err, sizeof err)) {
            fprintf(stderr, "decode: %s\n", err);
            return 1;
        }
        double dt = now_s() - t0;
        if (i >= 2) {
            t[i - 2] = dt;
            tm[i - 2] = x;
        }
    }
    double sorted[64];
    int n = reps < 64 ? reps : 64;
    memcpy(sorted, t, sizeof(double) * n);
    qsort(sorted, (size_t)n, sizeof(double), cmp_d);
    out->wall = sorted[n / 2];
    for (int i = 0; i < n; i++)
        if (t[i] == out->wall) out->tm = tm[i];
    out->labels = out->steps = out->skipped = 0;
    for (int b = 0; b < B; b++) {
        out->labels += res[b].n_tokens;
        out->steps += res[b].decode_steps;
        out->skipped += res[b].frames_skipped;
        rnnt_result_clear(&res[b]);
    }
    out->labels /= B;
    out->steps /= B;
    out->skipped /= B;
    rnnt_runner_free(r);
    free(in);
    free(res);
    free(t);
    free(tm);
    return 0;
}

typedef struct {
    rnnt_runner *r;
    int B, reps;
    rnnt_input *in;
    rnnt_result *res;
    pthread_barrier_t *go;
    int failed;
} worker_arg;

static void *worker_main(void *p)
{
    worker_arg *a = p;
    char err[512];
    for (int i = 0; i < 2 + a->reps; i++) {
        if (i == 2) pthread_barrier_wait(a->go);
        if (!a->failed && rnnt_runner_decode(a->r, a->B, a->in, a->res, NULL, err, sizeof err)) {
            fprintf(stderr, "decode: %s\n", err);
            a->failed = 1;
        }
    }
    return NULL;
}

/* W runners, W threads, each B utterances per call: aggregate wall time of reps calls each. */
static int run_workers(const rnnt_model *m, rnnt_runner_params p, int W, int B, int frames, int reps, float **feats,
                       double *wall)
{
    char err[512];
    worker_arg a[16];
    pthread_t th[16];
    pthread_barrier_t go;
    if (W > 16) W = 16;
    pthread_barrier_init(&go, NULL, (unsigned)W + 1);
    for (int w = 0; w < W; w++) {
        a[w] = (worker_arg){NULL, B, reps, calloc((size_t)B, sizeof(rnnt_input)), calloc((size_t)B, sizeof(rnnt_result)), &go, 0};
        if (rnnt_runner_create(m, &p, &a[w].r, err, sizeof err)) {
            fprintf(stderr, "runner: %s\n", err);
            return 1;
        }
        for (int b = 0; b < B; b++) a[w].in[b] = (rnnt_input){feats[b], frames, 1};
    }
    for (int w = 0; w < W; w++) pthread_create(&th[w], NULL, worker_main, &a[w]);
    pthread_barrier_wait(&go);
    double t0 = now_s();
    for (int w = 0; w < W; w++) pthread_join(th[w], NULL);
    *wall = now_s() - t0;
    int failed = 0;
    for (int w = 0; w < W; w++) {
        failed |= a[w].failed;
        for (int b = 0; b < B; b++) rnnt_result_clear(&a[w].res[b]);
        rnnt_runner_free(a[w].r);
        free(a[w].in);
        free(a[w].res);
    }
    pthread_barrier_destroy(&go);
    return failed;
}

/* --async: reps batches back to back on one runner, sync then two in flight, 3 rounds each. */
static int run_async(const rnnt_model *m, rnnt_runner_params p, int B, int frames, int reps, float **feats, double seconds)
{
    char err[512];
    rnnt_runner *r;
    size_t used0 = 0, used1 = 0, mem_total = 0;
    int have_mem = p.backend == RNNT_BACKEND_CUDA && rnnt_cuda_memory(p.device, &used0, &mem_total) == 0;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) {
        fprintf(stderr, "runner: %s\n", err);
        return 1;
    }
    rnnt_input *in = calloc((size_t)B, sizeof *in);
    rnnt_result *res[2] = {calloc((size_t)B, sizeof(rnnt_result)), calloc((size_t)B, sizeof(rnnt_result))};
    long long *tok_sum[2] = {calloc((size_t)reps + 2, sizeof(long long)), calloc((size_t)reps + 2, sizeof(long long))};
    for (int b = 0; b < B; b++) in[b] = (rnnt_input){feats[b], frames, 1};
    double wall[2][3], steady[2][3];
    int failed = 0;
    for (int round = 0; round < 3 && !failed; round++)
        for (int mode = 0; mode < 2 && !failed; mode++) {
            /* reps + 1 batches; the time per batch is from the first call to the last batch's
             * completion, over reps + 1 (in flight, the first batch's staging is not hidden) */
            int total = reps + 1, done = 0;
            double t_first = now_s(), t_last = 0, t_done1 = 0;
            for (int k = 0; k <= total && !failed; k++) {
                int n = 0;
                rnnt_result *o = res[mode];
                if (mode == 0) {
                    if (k == total) break;
                    if (rnnt_runner_decode(r, B, in, o, NULL, err, sizeof err)) failed = 1;
                    n = B;
                } else {
                    if (k < total && rnnt_runner_submit(r, B, in, err, sizeof err)) failed = 1;
                    if (failed || k == 0) continue;
                    if (rnnt_runner_collect(r, o, &n, NULL, err, sizeof err)) failed = 1;
                }
                if (failed) break;
                t_last = now_s();
                if (done == 0) t_done1 = t_last;
                long long sum = 0;
                for (int b = 0; b < n; b++) sum += o[b].n_tokens * 131LL + (o[b].n_tokens ? o[b].tokens[0] : 0);
                tok_sum[mode][done++] = sum;
            }
            if (failed) break;
            wall[mode][round] = (t_last - t_first) / total;
            /* a runner that decodes at submit (rnnt_runner_overlaps 0: the CPU) has no pipeline to fill, and its
             * second batch is decoded before the first collect: its steady state is the whole figure */
            steady[mode][round] = total > 1 && (mode == 0 || rnnt_runner_overlaps(r)) ? (t_last - t_done1) / (total - 1)
                                                                                     : wall[mode][round];
        }
    if (failed) fprintf(stderr, "decode: %s\n", err);
    int same = 1;
    for (int k = 0; k < reps && !failed; k++) same &= tok_sum[0][k] == tok_sum[1][k];
    /* the runner's device memory (buffers, graphs, workspaces) per utterance it holds, after the rounds */
    if (have_mem && rnnt_cuda_memory(p.device, &used1, &mem_total) != 0) have_mem = 0;
    if (!failed) {
        double w[2], sw[2];
        for (int mode = 0; mode < 2; mode++) {
            qsort(wall[mode], 3, sizeof(double), cmp_d);
            qsort(steady[mode], 3, sizeof(double), cmp_d);
            w[mode] = wall[mode][1];
            sw[mode] = steady[mode][1];
        }
        printf("| %d | %d | %.2f | %.2f | %.0f | %.0f | %.2f | %.2f / %.2f | %.0f | %s | %.2f |\n", B, p.max_batch,
               w[0] * 1e3, w[1] * 1e3, B * seconds / w[0], B * seconds / w[1], (w[0] - w[1]) * 1e3, sw[0] * 1e3,
               sw[1] * 1e3, B * seconds / sw[1], same ? "yes" : "NO",
               have_mem && used1 > used0 ? (double)(used1 - used0) / 1048576.0 / p.max_batch : NAN);
        fflush(stdout);
    }
    for (int mode = 0; mode < 2; mode++) {
        for (int b = 0; b < B; b++) rnnt_result_clear(&res[mode][b]);
        free(res[mode]);
        free(tok_sum[mode]);
    }
    free(in);
    rnnt_runner_free(r);
    return failed || !same;
}

/* --audio: features vs float PCM vs 16-bit PCM of the same utterances through one runner. */
static int run_audio(const rnnt_model *m, rnnt_runner_params p, int B, int frames, int reps, float **feats, float **pcm,
                     int16_t **pcm16, size_t ns, double seconds)
{
    char err[512];
    rnnt_runner *r;
    if (rnnt_runner_create(m, &p, &r, err, sizeof err)) {
        fprintf(stderr, "runner: %s\n", err);
        return 1;
    }
    rnnt_input *in = calloc((size_t)B, sizeof *in);
    rnnt_audio_input *af = calloc((size_t)B, sizeof *af), *as = calloc((size_t)B, sizeof *as);
    rnnt_result *ref = calloc((size_t)B, sizeof *ref), *res = calloc((size_t)B, sizeof *res);
    double *t[3], *fe[3];
    for (int k = 0; k < 3; k++) {
        t[k] = calloc((size_t)reps, sizeof(double));
        fe[k] = calloc((size_t)reps, sizeof(double));
    }
    for (int b = 0; b < B; b++) {
        in[b] = (rnnt_input){feats[b], frames, 1};
        af[b] = (rnnt_audio_input){pcm[b], NULL, ns, 1};
        as[b] = (rnnt_audio_input){NULL, pcm16[b], ns, 0};
    }
    int same_f = 0, same_s = 0;
    for (int i = 0; i < 2 + reps; i++) {
        for (int k = 0; k < 3; k++) {
            rnnt_timing x;
            double fs = 0, t0 = now_s();
            rnnt_status st = k == 0 ? rnnt_runner_decode(r, B, in, ref, &x, err, sizeof err)
                                    : rnnt_runner_decode_audio(r, B, k == 1 ? af : as, res, &x, &fs, err, sizeof err);
            double dt = now_s() - t0;
            if (st) {
                fprintf(stderr, "decode (%s): %s\n", k == 0 ? "features" : k == 1 ? "float PCM" : "16-bit PCM", err);
                return 1;
            }
            if (i >= 2) {
                t[k][i - 2] = dt;
                fe[k][i - 2] = fs;
            }
            if (i == 0 && k > 0)
                for (int b = 0; b < B; b++) {
                    int same = res[b].n_tokens == ref[b].n_tokens &&
                               !memcmp(res[b].tokens, ref[b].tokens, sizeof(int) * (size_t)ref[b].n_tokens);
                    if (k == 1) same_f += same;
                    else same_s += same;
                }
        }
    }
    double med[3], fmed[3];
    for (int k = 0; k < 3; k++) {
        qsort(t[k], (size_t)reps, sizeof(double), cmp_d);
        qsort(fe[k], (size_t)reps, sizeof(double), cmp_d);
        med[k] = t[k][reps / 2];
        fmed[k] = fe[k][reps / 2];
    }
    double mb_feat = (double)B * frames * m->feature_dim * 4 / 1048576, mb_pcm = (double)B * ns * 4 / 1048576;
    printf("| %d | %.2f | %.2f (%.3f) | %.2f (%.3f) | %.3f / %.3f | %.1f%% / %.1f%% | %.0f / %.0f / %.0f | %.1f / %.1f / %.1f | "
           "%d/%d, %d/%d |\n",
           B, med[0] * 1e3, med[1] * 1e3, med[1] / med[0], med[2] * 1e3, med[2] / med[0], fmed[1] * 1e3, fmed[2] * 1e3,
           100 * fmed[1] / med[1], 100 * fmed[2] / med[2], B * seconds / med[0], B * seconds / med[1], B * seconds / med[2],
           mb_feat, mb_pcm, mb_pcm / 2, same_f, B, same_s, B);
    fflush(stdout);
    for (int b = 0; b < B; b++) {
        rnnt_result_clear(&ref[b]);
        rnnt_result_clear(&res[b]);
    }
    for (int k = 0; k < 3; k++) {
        free(t[k]);
        free(fe[k]);
    }
    rnnt_runner_free(r);
    free(in);
    free(af);
    free(as);
    free(ref);
    free(res);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [--backend cuda|cpu] [--precision fp16|fp32] [--batches 1,32,256] "
                        "[--seconds 10] [--reps 5] [--workers 1,2] [--extras 0] [--audio 1] [--async 1] [--max-batch N]\n",
                argv[0]);
        return 2;
    }
    const char *dir = argv[1], *batches = "1,32,256", *workers = "1";
    double seconds = 10;
    int reps = 5, extras = 1, audio = 0, async = 0, max_batch = 0;
    rnnt_runner_params p = rnnt_runner_default_params();
    p.backend = RNNT_BACKEND_CUDA;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--backend")) p.backend = !strcmp(argv[i + 1], "cpu") ? RNNT_BACKEND_CPU : RNNT_BACKEND_CUDA;
        else if (!strcmp(argv[i], "--precision")) p.precision = !strcmp(argv[i + 1], "fp32") ? RNNT_PRECISION_FP32 : RNNT_PRECISION_FP16;
        else if (!strcmp(argv[i], "--batches")) batches = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--workers")) workers = argv[i + 1];
        else if (!strcmp(argv[i], "--extras")) extras = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--audio")) audio = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--async")) async = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-batch")) max_batch = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (p.backend == RNNT_BACKEND_CUDA && !rnnt_cuda_available()) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const rnnt_model_info *info = rnnt_model_get_info(m);
    int frames = (int)lround(seconds * info->sample_rate / info->hop_length);
    int Bs[16], nB = 0;
    for (char *s = (char *)batches; *s && nB < 16;) {
        Bs[nB++] = (int)strtol(s, &s, 10);
        if (*s == ',') s++;
    }
    int maxB = 1;
    for (int i = 0; i < nB; i++)
        if (Bs[i] > maxB) maxB = Bs[i];
    float **feats = calloc((size_t)maxB, sizeof *feats);
    for (int b = 0; b < maxB; b++) {
        feats[b] = malloc((size_t)frames * m->feature_dim * sizeof(float));
        for (int t = 0; t < frames; t++)
            for (int f = 0; f < m->feature_dim; f++) {
                float z = gauss();
                feats[b][(size_t)t * m->feature_dim + f] = m->fe_mean ? m->fe_mean[f] + m->fe_std[f] * z : z;
            }
    }
    printf("model %s (%s): %lld parameters, %d encoder layers x %d, %s LSTMs, big blanks %d; %d-frame utterances "
           "(%.1f s), %s %s, median of %d\n",
           info->name, dir, info->n_parameters, info->n_encoder_layers, info->encoder_hidden,
           info->lstm_activation == RNNT_ACT_HARD ? "hard" : "soft", info->n_big_blanks, frames, seconds,
           p.backend == RNNT_BACKEND_CUDA ? "cuda" : "cpu", p.precision == RNNT_PRECISION_FP32 ? "fp32" : "fp16", reps);

    if (audio) {
        /* samples giving exactly `frames` frames; the features are the CPU frontend's of the same PCM */
        rnnt_frontend *fe;
        if (rnnt_frontend_create(m, &fe, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        size_t ns = (size_t)(frames - 1) * info->hop_length + (size_t)m->fe.win_length;
        float **pcm = calloc((size_t)maxB, sizeof *pcm);
        int16_t **pcm16 = calloc((size_t)maxB, sizeof *pcm16);
        double t_fe = 0;
        for (int b = 0; b < maxB; b++) {
            pcm[b] = malloc(ns * sizeof(float));
            pcm16[b] = malloc(ns * sizeof(int16_t));
            double f1 = 100 + 3000 * urand(), f2 = 200 + 5000 * urand(), ph = 0;
            for (size_t i = 0; i < ns; i++) {
                double tt = (double)i / info->sample_rate, env = 0.05 + 0.2 * (1 + sin(6.283185307179586 * 3.1 * tt + b));
                double v = env * gauss() + 0.1 * sin(ph) + 0.05 * sin(6.283185307179586 * f2 * tt);
                ph += 6.283185307179586 * f1 * (1 + 0.2 * sin(tt)) / info->sample_rate;
                v = v > 0.999 ? 0.999 : v < -0.999 ? -0.999 : v;
                pcm16[b][i] = (int16_t)lrint(v * 32767);
                pcm[b][i] = pcm16[b][i] / 32768.0f; /* the same signal in both formats */
            }
            float *x;
            int got;
            double t0 = now_s();
            if (rnnt_frontend_compute_f32(fe, pcm[b], ns, frames, &x, &got, err, sizeof err) || got != frames) {
                fprintf(stderr, "frontend: %s\n", err);
                return 1;
            }
            t_fe += now_s() - t0;
            memcpy(feats[b], x, sizeof(float) * (size_t)frames * m->feature_dim);
            free(x);
        }
        rnnt_frontend_free(fe);
        printf("\nEngine from audio vs from features (the same %zu-sample utterances; CPU frontend on this host: %.0fx real "
               "time on one thread). Wall ms of the call, median; frontend ms: its own time (CUDA: GPU time of its kernels); "
               "same tokens: audio vs the CPU frontend's features, first call.\n\n| batch | features ms | float PCM ms (x "
               "features) | 16-bit PCM ms (x features) | frontend ms float / 16-bit | frontend share float / 16-bit | RTFx "
               "features / float / 16-bit | MiB sent features / float / 16-bit | same tokens float, 16-bit |\n"
               "|---|---|---|---|---|---|---|---|---|\n",
               ns, maxB * seconds / t_fe);
        for (int i = 0; i < nB; i++) {
            p.max_batch = max_batch > Bs[i] ? max_batch : Bs[i];
            p.max_frames = frames;
            if (run_audio(m, p, Bs[i], frames, reps, feats, pcm, pcm16, ns, seconds)) return 1;
        }
        for (int b = 0; b < maxB; b++) {
            free(pcm[b]);
            free(pcm16[b]);
            free(feats[b]);
        }
        free(pcm);
        free(pcm16);
        free(feats);
        rnnt_model_free(m);
        return 0;
    }
    if (async) {
        printf("\nSynchronous calls vs two batches in flight (rnnt_runner_submit / collect), one runner, one thread, %d "
               "batches back to back per round, median of 3 alternated rounds:\n\n| batch | runner max_batch | decode ms per "
               "batch | submit/collect ms per batch | RTFx decode | RTFx submit/collect | ms hidden per batch | steady ms per batch "
               "decode / submit-collect | RTFx submit/collect steady | same tokens | device MiB per utterance held |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|\n", reps + 1);
        int bad = 0;
        for (int i = 0; i < nB; i++) {
            p.max_batch = max_batch > Bs[i] ? max_batch : Bs[i];
            p.max_frames = frames;
            bad |= run_async(m, p, Bs[i], frames, reps, feats, seconds);
        }
        for (int b = 0; b < maxB; b++) free(feats[b]);
        free(feats);
        rnnt_model_free(m);
        return bad;
    }
    run_stats on[16], off[16], prof[16];
    printf("\n| batch | wall ms | RTFx | encoder ms (incl. upload) | joint proj ms | decode loop ms | backend host ms | runner "
           "host ms | steps/utt | labels/utt | frames skipped/utt |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < nB; i++) {
        p.max_batch = max_batch > Bs[i] ? max_batch : Bs[i];
        p.max_frames = frames;
        if (run(m, p, Bs[i], frames, reps, feats, &on[i], NULL)) return 1;
        /* backend host = the backend's wall time minus its GPU phases (staging, unpacking); runner host =
         * the rest of the call (input validation, result arrays, text) */
        double gpu = on[i].tm.encoder_s + on[i].tm.joint_s + on[i].tm.decode_s;
        printf("| %d | %.2f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.1f |\n", Bs[i], on[i].wall * 1e3,
               Bs[i] * seconds / on[i].wall, on[i].tm.encoder_s * 1e3, on[i].tm.joint_s * 1e3, on[i].tm.decode_s * 1e3,
               p.backend == RNNT_BACKEND_CUDA ? (on[i].tm.total_s - gpu) * 1e3 : 0.0,
               (on[i].wall - on[i].tm.total_s) * 1e3, on[i].steps, on[i].labels, on[i].skipped);
        fflush(stdout);
    }
    for (char *s = (char *)workers; *s;) {
        int W = (int)strtol(s, &s, 10);
        if (*s == ',') s++;
        if (W < 2) continue;
        printf("\n%d workers (a runner and a thread each, decoding at the same time):\n\n| batch | workers | wall ms per "
               "call (mean) | aggregate RTFx | one worker's RTFx (above) |\n|---|---|---|---|---|\n", W);
        for (int i = 0; i < nB; i++) {
            double wall;
            p.max_batch = max_batch > Bs[i] ? max_batch : Bs[i];
            p.max_frames = frames;
            if (run_workers(m, p, W, Bs[i], frames, reps, feats, &wall)) return 1;
            printf("| %d | %d | %.2f | %.0f | %.0f |\n", Bs[i], W, wall / reps * 1e3, W * reps * Bs[i] * seconds / wall,
                   Bs[i] * seconds / on[i].wall);
            fflush(stdout);
        }
    }
    if (extras && p.backend == RNNT_BACKEND_CUDA) {
        printf("\nTime split (RNNT_CUDA_DECODE=profile: the same kernels launched step by step from the host with events "
               "between phases; the per-step sync inflates the wall time, not the phases):\n\n| batch | encoder ms | "
               "predictor ms | joint ms (proj + per step) | decode rule ms | steps |\n|---|---|---|---|---|---|\n");
        for (int i = 0; i < nB; i++) {
            p.max_batch = max_batch > Bs[i] ? max_batch : Bs[i];
            if (run(m, p, Bs[i], frames, 1, feats, &prof[i], "profile")) return 1;
            printf("| %d | %.2f | %.2f | %.2f | %.2f | %.1f |\n", Bs[i], prof[i].tm.encoder_s * 1e3,
                   prof[i].tm.predictor_s * 1e3, prof[i].tm.joint_s * 1e3, prof[i].tm.decode_s * 1e3, prof[i].steps);
        }
    }
    if (extras && m->n_big > 0) {
        float *bo = (float *)m->joint_out_b;
        for (int k = m->vocab; k < m->blank; k++) bo[k] = -1e30f;
        printf("\nBig blanks on vs off (biases of outputs %d..%d set to -1e30):\n\n| batch | decode loop ms on | off | "
               "speed-up | steps/utt on | off | RTFx on | off |\n|---|---|---|---|---|---|---|---|\n",
               m->vocab, m->blank - 1);
        for (int i = 0; i < nB; i++) {
            p.max_batch = max_batch > Bs[i] ? max_batch : Bs[i];
            if (run(m, p, Bs[i], frames, reps, feats, &off[i], NULL)) return 1;
            printf("| %d | %.2f | %.2f | %.2f | %.1f | %.1f | %.0f | %.0f |\n", Bs[i], on[i].tm.decode_s * 1e3,
                   off[i].tm.decode_s * 1e3, off[i].tm.decode_s / on[i].tm.decode_s, on[i].steps, off[i].steps,
                   Bs[i] * seconds / on[i].wall, Bs[i] * seconds / off[i].wall);
        }
    }
    for (int b = 0; b < maxB; b++) free(feats[b]);
    free(feats);
    rnnt_model_free(m);
    return 0;
}
