/* cli.c — rnnt-transcribe: transcribe audio files or .npy feature files with a model directory.
 *   rnnt-transcribe --model DIR [--format text|json|srt|vtt] [--backend auto|cpu|cuda] [--precision fp16|fp32]
 *                   [--batch N] [--threads N] [--timing] FILE...
 * A file is told by its first bytes: .npy features, or audio (WAV, FLAC, Ogg, MP3, ...) that the
 * engine decodes, resamples and turns into features with the model's frontend.
 * Exit status: 0 all transcribed, 1 a file or the model failed, 2 usage error. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rnnt_audio.h"
#include "rnnt_npy.h"
#include "rnnt.h"
#include "rnnt_words.h"

typedef enum { FMT_TEXT, FMT_JSON, FMT_SRT, FMT_VTT } out_format;

/* One input's features: from a .npy file (npy owns them) or computed from audio (feats owns them). */
typedef struct {
    rnnt_npy npy;
    float *feats;
    int rows, from_audio;
} input_feats;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rnnt-transcribe --model DIR [options] FILE...\n"
            "Transcribe audio files (WAV, FLAC, Ogg Vorbis/Opus, MP3, AIFF, ...: any rate, any channels) or\n"
            "log-mel feature files ([frames, features] float32/float16 .npy, C order), told apart by their first bytes.\n"
            "  -m, --model DIR        model directory (model.yaml, weights.safetensors, tokens.txt)\n"
            "  -f, --format NAME      text (default: FILE<TAB>transcript), json (one object per file: text,\n"
            "                         words with start/end seconds, tokens with frames and times), srt or vtt\n"
            "                         (subtitles; with several files each document follows a '==> FILE <==' line)\n"
            "  -j, --json             the same as --format json\n"
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

static int print_result(const rnnt_model *m, const char *file, const rnnt_result *res, out_format fmt, int several)
{
    const rnnt_model_info *info = rnnt_model_get_info(m);
    if (fmt == FMT_TEXT) {
        printf("%s\t%s\n", file, res->text ? res->text : "");
        return 0;
    }
    char err[256];
    rnnt_word *w;
    int nw;
    if (rnnt_result_words(m, res, &w, &nw, err, sizeof err)) {
        fprintf(stderr, "rnnt-transcribe: %s: %s\n", file, err);
        return 1;
    }
    if (fmt == FMT_SRT || fmt == FMT_VTT) {
        char *doc = rnnt_subtitles(fmt == FMT_SRT ? RNNT_SUBS_SRT : RNNT_SUBS_VTT, w, nw, 0);
        rnnt_words_free(w, nw);
        if (!doc) { fprintf(stderr, "rnnt-transcribe: %s: out of memory\n", file); return 1; }
        if (several) printf("==> %s <==\n", file);
        fputs(doc, stdout);
        if (several) putchar('\n');
        free(doc);
        return 0;
    }
    json_t *toks = json_array(), *words = json_array();
    for (int i = 0; i < res->n_tokens; i++)
        json_array_append_new(toks, json_pack("{s:i, s:s, s:i, s:f}", "id", res->tokens[i], "token", rnnt_model_token(m, res->tokens[i]),
                                              "frame", res->frames[i], "time_s", res->frames[i] * info->frame_shift_s));
    for (int i = 0; i < nw; i++)
        json_array_append_new(words, json_pack("{s:s, s:f, s:f, s:o}", "word", w[i].text, "start", w[i].start_s, "end", w[i].end_s, "confidence",
                                               w[i].confidence >= 0 ? json_real(w[i].confidence) : json_null()));
    rnnt_words_free(w, nw);
    json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:f, s:i, s:i, s:i}", "file", file, "text", res->text ? res->text : "", "words", words,
                          "tokens", toks, "duration_s", res->encoder_frames * info->frame_shift_s, "encoder_frames", res->encoder_frames,
                          "frames_skipped", res->frames_skipped, "decode_steps", res->decode_steps);
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    if (s) puts(s);
    free(s);
    json_decref(o);
    return 0;
}

/* The first bytes of a file, to tell .npy from audio. */
static int read_magic(const char *path, unsigned char *buf, size_t n, size_t *got, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return -1; }
    *got = fread(buf, 1, n, f);
    fclose(f);
    return 0;
}

/* Features of one file; err names the file on failure. */
static int load_input(const char *path, const rnnt_model *m, rnnt_frontend **fe, int max_frames, input_feats *in, char *err, size_t errlen)
{
    const rnnt_model_info *info = rnnt_model_get_info(m);
    memset(in, 0, sizeof *in);
    unsigned char magic[16];
    size_t got;
    if (read_magic(path, magic, sizeof magic, &got, err, errlen)) return -1;
    if (rnnt_audio_is_npy(magic, got)) {
        if (rnnt_npy_load(path, info->feature_dim, max_frames, 0, &in->npy, err, errlen)) return -1;
        in->rows = in->npy.rows;
        return 0;
    }
    if (!rnnt_audio_sniff(magic, got)) {
        snprintf(err, errlen, "%s: neither a .npy feature file nor a recognised audio file (WAV, FLAC, Ogg, MP3, AIFF, AU, CAF, W64)", path);
        return -1;
    }
    if (!*fe && rnnt_frontend_create(m, fe, err, errlen)) return -1;
    /* the duration cap follows --max-frames: one frame per hop */
    rnnt_audio_limits lim = {.max_seconds = ((double)max_frames + 1) * info->hop_length / info->sample_rate + 1.0};
    float *x;
    size_t n;
    if (rnnt_audio_load_file(path, info->sample_rate, &lim, &x, &n, NULL, err, errlen)) return -1;
    char e2[384];
    rnnt_status st = rnnt_frontend_compute_f32(*fe, x, n, max_frames, &in->feats, &in->rows, e2, sizeof e2);
    free(x);
    if (st) { snprintf(err, errlen, "%s: %s", path, e2); return -1; }
    in->from_audio = 1;
    return 0;
}

static void free_input(input_feats *in)
{
    rnnt_npy_free(&in->npy);
    free(in->feats);
    memset(in, 0, sizeof *in);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"json", no_argument, 0, 'j'},     {"format", required_argument, 0, 'f'},     {"backend", required_argument, 0, 'b'},
        {"precision", required_argument, 0, 'p'}, {"batch", required_argument, 0, 'B'}, {"threads", required_argument, 0, 't'},
        {"max-frames", required_argument, 0, 'F'}, {"timing", no_argument, 0, 'T'},  {"version", no_argument, 0, 'V'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *model_dir = NULL;
    out_format fmt = FMT_TEXT;
    int batch = 16, show_timing = 0, c;
    rnnt_runner_params rp = rnnt_runner_default_params();
    while ((c = getopt_long(argc, argv, "m:jf:b:p:B:t:Vh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model_dir = optarg; break;
        case 'j': fmt = FMT_JSON; break;
        case 'f':
            if (!strcmp(optarg, "text")) fmt = FMT_TEXT;
            else if (!strcmp(optarg, "json")) fmt = FMT_JSON;
            else if (!strcmp(optarg, "srt")) fmt = FMT_SRT;
            else if (!strcmp(optarg, "vtt")) fmt = FMT_VTT;
            else { fprintf(stderr, "rnnt-transcribe: --format: '%s' is not text, json, srt or vtt\n", optarg); return 2; }
            break;
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
    rnnt_frontend *fe = NULL;
    input_feats *arr = calloc((size_t)batch, sizeof *arr);
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
            if (load_input(argv[i], m, &fe, rp.max_frames, &arr[nb], err, sizeof err)) {
                fprintf(stderr, "rnnt-transcribe: %s\n", err);
                rc = 1;
                continue;
            }
            names[nb] = argv[i];
            /* the .npy reader checked finiteness; the frontend makes finite features of finite samples
               (ln of at least log_floor) */
            in[nb] = (rnnt_input){arr[nb].from_audio ? arr[nb].feats : arr[nb].npy.data, arr[nb].rows, 1};
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
                    } else if (print_result(m, names[i], &res[i], fmt, nfiles > 1))
                        rc = 1;
                    rnnt_result_clear(&res[i]);
                }
            }
        }
        for (int i = 0; i < nb; i++) free_input(&arr[i]);
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
    rnnt_frontend_free(fe);
    rnnt_runner_free(r);
    rnnt_model_free(m);
    return rc;
}
