/* fuzz_cfg — the daemon's configuration file (server/cfg.c). Properties: a rejection names the file
 * in a message; a file that loads and validates survives a round trip through cfg_write_yaml (what
 * --print-config writes loads back to the same value of every key). */
#include "cfg.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cfg c;
    char err[512];
    cfg_defaults(&c);
    if (cfg_load_mem(&c, "fuzz.yaml", (const char *)data, size, err, sizeof err)) {
        fuzz_check_message(err, sizeof err);
        FUZZ_CHECK(strncmp(err, "fuzz.yaml", 9) == 0, "the message does not name the file: %s", err);
        return 0;
    }
    if (cfg_validate(&c, err, sizeof err)) {
        fuzz_check_message(err, sizeof err);
        return 0;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) abort();
    cfg_write_yaml(&c, m);
    fclose(m);
    cfg back;
    cfg_defaults(&back);
    int rc = cfg_load_mem(&back, "printed.yaml", text, len, err, sizeof err);
    FUZZ_CHECK(rc == 0, "the printed configuration does not load: %s", err);
    for (const cfg_key *k = cfg_keys(); k->name; k++) {
        char a[CFG_VALUE_MAX], b[CFG_VALUE_MAX];
        cfg_format_value(&c, k, a, sizeof a);
        cfg_format_value(&back, k, b, sizeof b);
        FUZZ_CHECK(!strcmp(a, b), "%s: %s printed, %s read back", k->name, a, b);
    }
    free(text);
    return 0;
}
