/* cli.c — rnnt-transcribe: transcribe .npy feature files with a model directory.
 *   rnnt-transcribe --model DIR [--json] [--backend auto|cpu|cuda] [--precision fp16|fp32]
 *                   [--batch N] [--threads N] [--timing] FILE.npy...
 * Exit status: 0 all transcribed, 1 a file or the model failed, 2 usage error. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "rnnt.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rnnt-transcribe --model DIR [options] FILE.npy...\n"
            "Transcribe log-mel feature files ([frames, features] float32/float16 .npy, C order).\n"
            "  -m, --model DIR        model directory (model.yaml, weights.safetensors, tokens.txt)\n"
            "  -j, --json             one JSON object per file: text, tokens with frames and times\n"
            "  -b, --backend NAME     auto (default), cpu or cuda\n"
            "  -p, --precision NAME   fp16 (default) or fp32 (CUDA backend)\n"
            "  -B, --batch N          utterances decoded together (default 16)\n"
            "  -t, --threads N        BLAS threads for the CPU backend (default: the library's)\n"
            "      --max-frames N     longest accepted input in frames (default 30000)\n"
            "      --timing           print the time split to stderr\n"
            "  -V, --version          print the version\n"
            "  -h, --help             this text\n");
}

static int parse_pos(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static void print_result(const rnnt_model *m, const char *file, const rnnt_result *res, int json)
{
    const rnnt_model_info *info = rnnt_model_get_info(m);
    if (!json) {
        printf("%s\t%s\n", file, res->text ? res->text : "");
        return;
    }
    json_t *toks = json_array();
    for (int i = 0; i < res->n_tokens; i++)
        json_array_append_new(toks, json_pack("{s:i, s:s, s:i, s:f}", "id", res->tokens[i], "token", rnnt_model_token(m, res->tokens[i]),
                                              "frame", res->frames[i], "time_s", res->frames[i] * info->frame_shift_s));
    json_t *o = json_pack("{s:s, s:s, s:o, s:i, s:i, s:i}", "file", file, "text", res->text ? res->text : "", "tokens", toks,
                          "encoder_frames", res->encoder_frames, "frames_skipped", res->frames_skipped, "decode_steps",
                          res->decode_steps);
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    if (s) puts(s);
    free(s);
    json_decref(o);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"json", no_argument, 0, 'j'},     {"backend", required_argument, 0, 'b'},
        {"precision", required_argument, 0, 'p'}, {"batch", required_argument, 0, 'B'}, {"threads", required_argument, 0, 't'},
        {"max-frames", required_argument, 0, 'F'}, {"timing", no_argument, 0, 'T'},  {"version", no_argument, 0, 'V'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *model_dir = NULL;
    int json = 0, batch = 16, show_timing = 0, c;
    rnnt_runner_params rp = rnnt_runner_default_params();
    while ((c = getopt_long(argc, argv, "m:jb:p:B:t:Vh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_dir = optarg; break;
        case 'j': json = 1; break;
        case 'b':
            if (!strcmp(optarg, "auto")) rp.backend = RNNT_BACKEND_AUTO;
            else if (!strcmp(optarg, "cpu")) rp.backend = RNNT_BACKEND_CPU;
            else if (!strcmp(optarg, "cuda")) rp.backend = RNNT_BACKEND_CUDA;
            else { fprintf(stderr, "rnnt-transcribe: --backend: '%s' is not auto, cpu or cuda\n", optarg); return 2; }
            break;
        case 'p':
            if (!strcmp(optarg, "fp16")) rp.precision = RNNT_PRECISION_FP16;
            else if (!strcmp(optarg, "fp32")) rp.precision = RNNT_PRECISION_FP32;
            else { fprintf(stderr, "rnnt-transcribe: --precision: '%s' is not fp16 or fp32\n", optarg); return 2; }
            break;
        case 'B':
            if (parse_pos(optarg, 1, 4096, &batch)) { fprintf(stderr, "rnnt-transcribe: --batch: expected 1..4096\n"); return 2; }
            break;
        case 't':
            if (parse_pos(optarg, 1, 1024, &rp.cpu_threads)) { fprintf(stderr, "rnnt-transcribe: --threads: expected 1..1024\n"); return 2; }
            break;
        case 'F':
            if (parse_pos(optarg, 1, 10000000, &rp.max_frames)) { fprintf(stderr, "rnnt-transcribe: --max-frames: expected 1..10000000\n"); return 2; }
            break;
        case 'T': show_timing = 1; break;
        case 'V': printf("rnnt-transcribe %s\n", RNNT_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!model_dir || optind >= argc) {
        usage(stderr);
        return 2;
    }
    char err[512];
    rnnt_model *m;
    if (rnnt_model_load(model_dir, &m, err, sizeof err)) {
        fprintf(stderr, "rnnt-transcribe: %s\n", err);
        return 1;
    }
    int nfiles = argc - optind;
    if (batch > nfiles) batch = nfiles;
    rp.max_batch = batch;
    rnnt_runner *r;
    if (rnnt_runner_create(m, &rp, &r, err, sizeof err)) {
        fprintf(stderr, "rnnt-transcribe: %s\n", err);
        rnnt_model_free(m);
        return 1;
    }
    const rnnt_model_info *info = rnnt_model_get_info(m);
    int rc = 0;
    rnnt_npy *arr = calloc((size_t)batch, sizeof *arr);
    rnnt_input *in = calloc((size_t)batch, sizeof *in);
    rnnt_result *res = calloc((size_t)batch, sizeof *res);
    const char **names = calloc((size_t)batch, sizeof *names);
    if (!arr || !in || !res || !names) {
        fprintf(stderr, "rnnt-transcribe: out of memory\n");
        rc = 1;
        goto done;
    }
    rnnt_timing total = {0};
    double audio_s = 0;
    for (int first = optind; first < argc; first += batch) {
        int nb = 0;
        for (int i = first; i < argc && i < first + batch; i++) {
            if (rnnt_npy_load(argv[i], info->feature_dim, rp.max_frames, 0, &arr[nb], err, sizeof err)) {
                fprintf(stderr, "rnnt-transcribe: %s\n", err);
                rc = 1;
                continue;
            }
            names[nb] = argv[i];
            in[nb] = (rnnt_input){arr[nb].data, arr[nb].rows, 1}; /* the .npy reader checked finiteness */
            audio_s += (double)arr[nb].rows * info->hop_length / info->sample_rate;
            nb++;
        }
        if (nb) {
            rnnt_timing tm;
            if (rnnt_runner_decode(r, nb, in, res, &tm, err, sizeof err)) {
                fprintf(stderr, "rnnt-transcribe: %s\n", err);
                rc = 1;
            } else {
                total.encoder_s += tm.encoder_s;
                total.predictor_s += tm.predictor_s;
                total.joint_s += tm.joint_s;
                total.decode_s += tm.decode_s;
                total.total_s += tm.total_s;
                for (int i = 0; i < nb; i++) {
                    if (res[i].status) {
                        fprintf(stderr, "rnnt-transcribe: %s: %s\n", names[i], rnnt_status_str(res[i].status));
                        rc = 1;
                    } else
                        print_result(m, names[i], &res[i], json);
                    rnnt_result_clear(&res[i]);
                }
            }
        }
        for (int i = 0; i < nb; i++) rnnt_npy_free(&arr[i]);
    }
    if (show_timing)
        fprintf(stderr, "backend %s (%s): %.3f s audio in %.4f s (RTFx %.1f): encoder %.4f, predictor %.4f, joint %.4f, decode %.4f s\n",
                rnnt_runner_backend_name(r), rnnt_runner_device_name(r), audio_s, total.total_s,
                total.total_s > 0 ? audio_s / total.total_s : 0.0, total.encoder_s, total.predictor_s, total.joint_s, total.decode_s);
done:
    free(arr);
    free(in);
    free(res);
    free(names);
    rnnt_runner_free(r);
    rnnt_model_free(m);
    return rc;
}
