/* fuzz_model — model directories through the real loader (engine/model_load.c: model.yaml via
 * engine/yaml_doc.c, tokens.txt, weights.safetensors). Input: one byte choosing a golden model whose
 * small, valid weights sit in the directory, then model.yaml, a NUL byte, and tokens.txt. Each run
 * writes the two files into a private temporary directory and loads it, so the YAML and token readers
 * are exercised deeply and a yaml that matches the chosen weights loads completely. Properties: a
 * rejection has a message; a loaded model's info is consistent and its tokens detokenize (the
 * text of every result is made from them); no leak (LeakSanitizer).
 * The directory is under RNNTD_FUZZ_TMPDIR, else /dev/shm when writable, else TMPDIR or /tmp. */
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "rnnt.h"

static const char *const goldens[] = {"hard_bb", "hard_f16", "hard_timestack", "soft_bf16", "soft_bigblank_cap",
                                      "soft_plain"};
enum { N_GOLDEN = sizeof goldens / sizeof goldens[0] };
static char g_root[PATH_MAX];

static void cleanup(void)
{
    char p[PATH_MAX + 64];
    for (int i = 0; i < N_GOLDEN; i++) {
        static const char *const files[] = {"model.yaml", "tokens.txt", "weights.safetensors"};
        for (int j = 0; j < 3; j++) {
            snprintf(p, sizeof p, "%s/%d/%s", g_root, i, files[j]);
            unlink(p);
        }
        snprintf(p, sizeof p, "%s/%d", g_root, i);
        rmdir(p);
    }
    rmdir(g_root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* Two small files are written per input: on tmpfs that is ~5x faster than on a disk. */
    const char *tmp = getenv("RNNTD_FUZZ_TMPDIR");
    if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(g_root, sizeof g_root, "%s/rnntd-fuzz-model-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_root)) { perror("mkdtemp"); abort(); }
    atexit(cleanup);
    char dir[PATH_MAX + 16], link[PATH_MAX + 64], target[PATH_MAX];
    for (int i = 0; i < N_GOLDEN; i++) {
        snprintf(dir, sizeof dir, "%s/%d", g_root, i);
        snprintf(link, sizeof link, "%s/weights.safetensors", dir);
        snprintf(target, sizeof target, "%s/%s/weights.safetensors", RNNTD_GOLDEN_DIR, goldens[i]);
        if (mkdir(dir, 0700) || symlink(target, link)) { perror(dir); abort(); }
    }
    return 0;
}

static void write_file(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) { perror(path); abort(); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/%d", g_root, data[0] % N_GOLDEN);
    data++, size--;
    const uint8_t *nul = memchr(data, '\0', size);
    size_t ylen = nul ? (size_t)(nul - data) : size;
    write_file(dir, "model.yaml", data, ylen);
    write_file(dir, "tokens.txt", nul ? nul + 1 : data + size, nul ? size - ylen - 1 : 0);
    rnnt_model *m;
    char err[512];
    if (rnnt_model_load(dir, &m, err, sizeof err)) {
        fuzz_check_message(err, sizeof err);
        FUZZ_CHECK(m == NULL, "a model returned with an error");
        return 0;
    }
    const rnnt_model_info *I = rnnt_model_get_info(m);
    FUZZ_CHECK(I->feature_dim >= 1 && I->vocab_size >= 1 && I->subsampling >= 1, "info: dim %d vocab %d subsampling %d",
               I->feature_dim, I->vocab_size, I->subsampling);
    for (int id = 0; id < I->vocab_size; id++) {
        const char *t = rnnt_model_token(m, id);
        FUZZ_CHECK(t && t[0], "token %d", id);
    }
    FUZZ_CHECK(rnnt_model_token(m, I->vocab_size) == NULL, "token past the vocabulary");
    /* Every result's text is made from these tokens: the whole vocabulary, twice, in one string. */
    int n = 2 * I->vocab_size;
    int *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) abort();
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        ids[i] = i % I->vocab_size;
        bytes += strlen(rnnt_model_token(m, ids[i]));
    }
    char *text = rnnt_model_detokenize(m, ids, n);
    FUZZ_CHECK(text && strlen(text) <= bytes + (size_t)n, "text of %zu bytes from %zu", text ? strlen(text) : 0, bytes);
    free(text);
    free(ids);
    rnnt_model_free(m);
    return 0;
}
