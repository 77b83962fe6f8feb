/* bench_stream.c — what streaming costs on the CPU backend: the same utterances decoded whole
 * (rnnt_runner_decode, one batch) and as streams fed in chunks (rnnt_runner_advance_streams over all
 * streams each round, as a sequence batcher would), on one runner, one thread.
 *
 *   bench_stream MODEL_DIR [--chunk-frames 16] [--streams 1,16] [--reps 5] [--threads 1] FILE.npy...
 *
 * For S streams the files are used in turn (S utterances). Times: wall time of all the decoding,
 * median of --reps after one warm-up; for streams also every advance call (its median and p99: on
 * one core that is the compute part of a partial result's latency after a chunk arrives). Overhead =
 * streamed / whole. The tokens of every stream are compared with the whole decode and mismatches
 * printed (a benchmark reports what it saw; the tests assert). Besides wall time, the thread's CPU
 * time of the same runs (median): on a machine shared with other jobs it leaves out preemption. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rnnt_npy.h"
#include "rnnt.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of this thread: on a shared machine, what the work cost without the time others had the
 * core (with one BLAS thread all of the work runs on this thread). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

typedef struct {
    int S, chunk, feature_dim;
    const rnnt_npy *utt; /* S of them */
} job;

/* Whole-utterance decode of the S utterances in one batch; fills res. */
static double run_whole(rnnt_runner *r, const job *j, rnnt_result *res, double *cpu)
{
    rnnt_input in[j->S];
    char err[512];
    for (int i = 0; i < j->S; i++) in[i] = (rnnt_input){j->utt[i].data, j->utt[i].rows, 1};
    double t0 = now_s(), c0 = cpu_s();
    if (rnnt_runner_decode(r, j->S, in, res, NULL, err, sizeof err)) {
        fprintf(stderr, "bench_stream: %s\n", err);
        exit(1);
    }
    *cpu = cpu_s() - c0;
    return now_s() - t0;
}

/* The streams: each round every stream gets its next chunk, then one advance for all of them. The
 * per-advance times go to adv (n_adv of them). */
static double run_streams(rnnt_runner *r, const rnnt_model *m, const job *j, rnnt_result *res, double *adv, int *n_adv, double *cpu)
{
    double c_start = cpu_s();
    char err[512];
    rnnt_stream *s[j->S];
    int fed[j->S];
    double t_total = 0;
    for (int i = 0; i < j->S; i++) {
        if (rnnt_stream_create(m, &s[i], err, sizeof err)) {
            fprintf(stderr, "bench_stream: %s\n", err);
            exit(1);
        }
        fed[i] = 0;
    }
    *n_adv = 0;
    for (int left = j->S; left;) {
        double t0 = now_s();
        for (int i = 0; i < j->S; i++) {
            int c = j->utt[i].rows - fed[i] < j->chunk ? j->utt[i].rows - fed[i] : j->chunk;
            if (c > 0) rnnt_stream_accept_features(s[i], j->utt[i].data + (size_t)fed[i] * j->feature_dim, c, j->feature_dim, 1, NULL, 0);
            fed[i] += c;
            if (fed[i] == j->utt[i].rows) rnnt_stream_input_finished(s[i], NULL, 0);
        }
        double t1 = now_s();
        if (rnnt_runner_advance_streams(r, j->S, s, NULL, err, sizeof err)) {
            fprintf(stderr, "bench_stream: %s\n", err);
            exit(1);
        }
        double t2 = now_s();
        adv[(*n_adv)++] = t2 - t1;
        left = 0;
        for (int i = 0; i < j->S; i++) left += !rnnt_stream_is_final(s[i]);
        t_total += t2 - t0;
    }
    double t0 = now_s();
    for (int i = 0; i < j->S; i++) {
        rnnt_stream_get_result(s[i], &res[i], NULL, 0);
        rnnt_stream_free(s[i]);
    }
    *cpu = cpu_s() - c_start;
    return t_total + (now_s() - t0);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR [--chunk-frames 16] [--streams 1,16] [--reps 5] [--threads 1] FILE.npy...\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1], *streams = "1,16";
    int chunk = 16, reps = 5, threads = 1, first_file = 0;
    for (int i = 2; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--chunk-frames")) chunk = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--streams")) streams = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "bench_stream: unknown option %s\n", argv[i]);
            return 2;
        } else {
            first_file = i;
            break;
        }
    }
    if (!first_file || chunk < 1 || reps < 1 || threads < 1) {
        fprintf(stderr, "bench_stream: give files, and positive --chunk-frames, --reps, --threads\n");
        return 2;
    }
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(dir, &m, err, sizeof err)) {
        fprintf(stderr, "bench_stream: %s\n", err);
        return 1;
    }
    const rnnt_model_info *info = rnnt_model_get_info(m);
    int n_files = argc - first_file;
    rnnt_npy *files = calloc((size_t)n_files, sizeof *files);
    int max_rows = 1;
    for (int i = 0; i < n_files; i++) {
        if (rnnt_npy_load(argv[first_file + i], info->feature_dim, 0, 0, &files[i], err, sizeof err)) {
            fprintf(stderr, "bench_stream: %s\n", err);
            return 1;
        }
        if (files[i].rows > max_rows) max_rows = files[i].rows;
    }
    double hop_s = (double)info->hop_length / info->sample_rate;
    printf("model %s: %d files, chunks of %d frames (%.0f ms), %d BLAS thread(s), median of %d after a warm-up\n\n", info->name, n_files,
           chunk, chunk * hop_s * 1000, threads, reps);
    printf("| streams | audio s | whole ms wall / cpu | streamed ms wall / cpu | overhead wall / cpu | advance calls | "
           "advance ms median / p99 | token mismatches |\n|---|---|---|---|---|---|---|---|\n");
    for (const char *p = streams; *p;) {
        int S = atoi(p);
        while (*p && *p != ',') p++;
        if (*p == ',') p++;
        if (S < 1) continue;
        rnnt_runner_params rp = rnnt_runner_default_params();
        rp.backend = RNNT_BACKEND_CPU;
        rp.max_batch = S;
        rp.max_frames = max_rows;
        rp.cpu_threads = threads;
        rnnt_runner *r;
        if (rnnt_runner_create(m, &rp, &r, err, sizeof err)) {
            fprintf(stderr, "bench_stream: %s\n", err);
            return 1;
        }
        rnnt_npy utt[S];
        double audio = 0;
        for (int i = 0; i < S; i++) {
            utt[i] = files[i % n_files];
            audio += utt[i].rows * hop_s;
        }
        job j = {S, chunk, info->feature_dim, utt};
        int max_adv = max_rows / chunk + 2;
        double whole[reps], streamed[reps], whole_cpu[reps], streamed_cpu[reps], *adv = malloc(sizeof(double) * (size_t)max_adv * reps), *adv_one = malloc(sizeof(double) * max_adv);
        int n_adv_all = 0, mismatches = 0, calls = 0;
        rnnt_result rw[S], rs[S];
        memset(rw, 0, sizeof rw);
        memset(rs, 0, sizeof rs);
        for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up */
            double cw, cs;
            double tw = run_whole(r, &j, rw, &cw);
            int n_adv;
            double ts = run_streams(r, m, &j, rs, adv_one, &n_adv, &cs);
            for (int i = 0; i < S; i++) {
                if (rs[i].n_tokens != rw[i].n_tokens || memcmp(rs[i].tokens, rw[i].tokens, sizeof(int) * (size_t)rw[i].n_tokens) ||
                    memcmp(rs[i].frames, rw[i].frames, sizeof(int) * (size_t)rw[i].n_tokens))
                    mismatches++;
                rnnt_result_clear(&rw[i]);
                rnnt_result_clear(&rs[i]);
            }
            if (rep < 0) continue;
            whole[rep] = tw;
            streamed[rep] = ts;
            whole_cpu[rep] = cw;
            streamed_cpu[rep] = cs;
            memcpy(adv + n_adv_all, adv_one, sizeof(double) * n_adv);
            n_adv_all += n_adv;
            calls = n_adv;
        }
        double w = pct(whole, reps, 0.5), s = pct(streamed, reps, 0.5), wc = pct(whole_cpu, reps, 0.5), sc = pct(streamed_cpu, reps, 0.5);
        printf("| %d | %.1f | %.2f / %.2f | %.2f / %.2f | %.2fx / %.2fx | %d | %.3f / %.3f | %d |\n", S, audio, w * 1e3, wc * 1e3, s * 1e3,
               sc * 1e3, s / w, sc / wc, calls, pct(adv, n_adv_all, 0.5) * 1e3, pct(adv, n_adv_all, 0.99) * 1e3, mismatches);
        fflush(stdout);
        free(adv);
        free(adv_one);
        rnnt_runner_free(r);
    }
    for (int i = 0; i < n_files; i++) rnnt_npy_free(&files[i]);
    free(files);
    rnnt_model_free(m);
    return 0;
}
