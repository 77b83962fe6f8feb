/* test_cfg.c — the daemon's configuration: the shipped file, every kind of bad input, flags. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cfg.h"
#include "rnnt.h"

static const char *g_shipped; /* path of conf/rnntd.yaml, from argv */

static int load(cfg *c, const char *text, char *err, size_t n)
{
    cfg_defaults(c);
    return cfg_load_mem(c, "t.yaml", text, strlen(text), err, n);
}

/* Loads text, expects failure with exactly `want` as the message. */
static void expect_err(const char *text, const char *want)
{
    cfg c;
    char err[512] = "";
    int rc = load(&c, text, err, sizeof err);
    if (rc == 0 || strcmp(err, want) != 0)
        fail_msg("for:\n%s\nwant error: %s\ngot (rc %d): %s", text, want, rc, err);
}

static int same_cfg(const cfg *a, const cfg *b, const char **which)
{
    char va[CFG_VALUE_MAX], vb[CFG_VALUE_MAX];
    for (const cfg_key *k = cfg_keys(); k->name; k++) {
        cfg_format_value(a, k, va, sizeof va);
        cfg_format_value(b, k, vb, sizeof vb);
        if (strcmp(va, vb)) {
            *which = k->name;
            return 0;
        }
    }
    return 1;
}

static void test_defaults_valid(void **st)
{
    (void)st;
    cfg c;
    char err[256];
    cfg_defaults(&c);
    assert_int_equal(cfg_validate(&c, err, sizeof err), 0);
    assert_string_equal(c.listen, "127.0.0.1");
    assert_int_equal(c.backend, CFG_BACKEND_AUTO);
    /* Every key has a doc string and a section. */
    for (const cfg_key *k = cfg_keys(); k->name; k++) {
        assert_non_null(strchr(k->name, '.'));
        assert_true(k->doc && strlen(k->doc) > 10);
    }
}

/* conf/rnntd.yaml is exactly what the table writes for the defaults: every key present, documented,
 * at its default. Regenerate with `rnntd --print-config > conf/rnntd.yaml`. */
static void test_shipped_file(void **st)
{
    (void)st;
    FILE *f = fopen(g_shipped, "rb");
    assert_non_null(f);
    static char file[1 << 16];
    size_t n = fread(file, 1, sizeof file - 1, f);
    fclose(f);
    file[n] = '\0';

    cfg d;
    cfg_defaults(&d);
    char *gen = NULL;
    size_t gl = 0;
    FILE *m = open_memstream(&gen, &gl);
    cfg_write_yaml(&d, m);
    fclose(m);
    if (strcmp(gen, file) != 0)
        fail_msg("%s differs from `rnntd --print-config` (regenerate it)", g_shipped);
    free(gen);

    cfg c;
    char err[512];
    cfg_defaults(&c);
    assert_int_equal(cfg_load_file(&c, g_shipped, err, sizeof err), 0);
    const char *which = NULL;
    if (!same_cfg(&c, &d, &which)) fail_msg("shipped file sets %s away from its default", which);
    for (const cfg_key *k = cfg_keys(); k->name; k++) {
        char needle[80];
        snprintf(needle, sizeof needle, "\n  %s: ", strchr(k->name, '.') + 1);
        if (!strstr(file, needle)) fail_msg("key %s missing from the shipped file", k->name);
    }
}

static void test_round_trip(void **st)
{
    (void)st;
    cfg c, back;
    char err[512];
    cfg_defaults(&c);
    assert_int_equal(cfg_set(&c, "server.auth_token_file", "/etc/rnntd/tok \"x\\y", err, sizeof err), 0);
    assert_int_equal(cfg_set(&c, "batching.max_batch", "7", err, sizeof err), 0);
    assert_int_equal(cfg_set(&c, "log.requests", "false", err, sizeof err), 0);
    assert_int_equal(cfg_set(&c, "model.precision", "fp32", err, sizeof err), 0);
    char *gen = NULL;
    size_t gl = 0;
    FILE *m = open_memstream(&gen, &gl);
    cfg_write_yaml(&c, m);
    fclose(m);
    cfg_defaults(&back);
    if (cfg_load_mem(&back, "gen.yaml", gen, gl, err, sizeof err)) fail_msg("%s", err);
    const char *which = NULL;
    if (!same_cfg(&c, &back, &which)) fail_msg("round trip changed %s", which);
    free(gen);
    /* The longest path of backslashes and quotes doubles when escaped: printed whole, read back
     * the same (found by tests/fuzz/fuzz_cfg: the writer's buffer cut it). */
    char path[CFG_PATH_MAX];
    for (size_t i = 0; i + 1 < sizeof path; i++) path[i] = i % 3 ? '\\' : '"';
    path[sizeof path - 1] = '\0';
    assert_int_equal(cfg_set(&c, "model.path", path, err, sizeof err), 0);
    m = open_memstream(&gen, &gl);
    cfg_write_yaml(&c, m);
    fclose(m);
    cfg_defaults(&back);
    if (cfg_load_mem(&back, "gen.yaml", gen, gl, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(back.model_path, path);
    free(gen);
}

static void test_good_values(void **st)
{
    (void)st;
    cfg c;
    char err[512];
    const char *text = "# comment\n"
                       "server:\n  listen: \"::1\"\n  port: 0\n"
                       "model:\n  path: /srv/m\n  backend: cpu\n  precision: fp32\n"
                       "batching:\n  max_batch: 1\n  max_delay_us: 0\n"
                       "log:\n  level: debug\n  requests: false\n";
    if (load(&c, text, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(c.listen, "::1");
    assert_int_equal(c.port, 0);
    assert_string_equal(c.model_path, "/srv/m");
    assert_int_equal(c.backend, CFG_BACKEND_CPU);
    assert_int_equal(c.precision, CFG_PRECISION_FP32);
    assert_int_equal(c.max_batch, 1);
    assert_int_equal(c.max_delay_us, 0);
    assert_int_equal(c.log_level, 3);
    assert_int_equal(c.log_requests, 0);
    assert_int_equal(c.max_queue, 1024); /* untouched keys keep their defaults */
    /* An empty file is every default. */
    assert_int_equal(load(&c, "", err, sizeof err), 0);
    assert_int_equal(load(&c, "# only a comment\n", err, sizeof err), 0);
    /* Bounds are inclusive. */
    assert_int_equal(load(&c, "server:\n  port: 65535\n", err, sizeof err), 0);
    assert_int_equal(c.port, 65535);
}

static void test_bad_keys(void **st)
{
    (void)st;
    expect_err("server:\n  prot: 80\n", "t.yaml:2:3: server.prot: unknown key");
    expect_err("serve:\n  port: 80\n", "t.yaml:1:1: serve: unknown section");
    expect_err("server:\n  port: 80\n\nbatching:\n  max_batch: 4\n  max_batch: 5\n",
               "t.yaml:6:3: batching.max_batch: key given twice");
    expect_err("log:\n  level: info\nlog:\n  requests: true\n", "t.yaml:3:1: log: section given twice");
    expect_err("port: 80\n", "t.yaml:1:1: port: unknown section");
    expect_err("server: 80\n", "t.yaml:1:9: server: expected a mapping of keys");
    expect_err("- a\n- b\n", "t.yaml:1:1: the file must be a mapping of sections (server:, model:, ...)");
    expect_err("server:\n  [a]: 1\n", "t.yaml:2:3: server: a key must be a plain name");
    expect_err("server:\n  listen: [a, b]\n", "t.yaml:2:11: server.listen: expected a single value");
}

static void test_bad_values(void **st)
{
    (void)st;
    expect_err("batching:\n  max_batch: 0\n", "t.yaml:2:14: batching.max_batch: 0 is out of range [1, 2048]");
    expect_err("server:\n  port: 65536\n", "t.yaml:2:9: server.port: 65536 is out of range [0, 65535]");
    expect_err("server:\n  port: -1\n", "t.yaml:2:9: server.port: -1 is out of range [0, 65535]");
    expect_err("server:\n  port: abc\n", "t.yaml:2:9: server.port: expected an integer, got \"abc\"");
    expect_err("server:\n  port: \"8080\"\n", "t.yaml:2:9: server.port: expected an integer, got \"8080\"");
    expect_err("server:\n  port: 80.5\n", "t.yaml:2:9: server.port: expected an integer, got \"80.5\"");
    expect_err("server:\n  port: 0x50\n", "t.yaml:2:9: server.port: expected an integer, got \"0x50\"");
    expect_err("server:\n  port:\n", "t.yaml:2:8: server.port: expected an integer, got \"\"");
    expect_err("limits:\n  max_frames: 99999999999999999999\n",
               "t.yaml:2:15: limits.max_frames: expected an integer, got \"99999999999999999999\"");
    expect_err("model:\n  backend: gpu\n", "t.yaml:2:12: model.backend: \"gpu\" is not one of auto | cpu | cuda");
    expect_err("log:\n  requests: yes\n", "t.yaml:2:13: log.requests: expected true or false, got \"yes\"");
    expect_err("log:\n  level: verbose\n",
               "t.yaml:2:10: log.level: \"verbose\" is not one of error | warn | info | debug");
    expect_err("model:\n  path:\n", "t.yaml:2:8: model.path: expected a string (write \"\" for none)");
    expect_err("model:\n  path: \"a\\tb\"\n", "t.yaml:2:9: model.path: control character in the value");
}

/* model.devices: auto, a flow or block sequence, or (flags) comma-separated text; each error positioned. */
static void test_device_list(void **st)
{
    (void)st;
    cfg c;
    char err[512] = "", buf[CFG_VALUE_MAX];
    const cfg_key *k = cfg_find("model.devices");
    assert_non_null(k);
    assert_int_equal(load(&c, "", err, sizeof err), 0);
    assert_int_equal(c.devices.n, 0);
    cfg_format_value(&c, k, buf, sizeof buf);
    assert_string_equal(buf, "auto");
    assert_int_equal(load(&c, "model:\n  devices: [0, 0, 3]\n", err, sizeof err), 0);
    assert_int_equal(c.devices.n, 3);
    assert_int_equal(c.devices.v[2], 3);
    cfg_format_value(&c, k, buf, sizeof buf);
    assert_string_equal(buf, "[0, 0, 3]");
    cfg d;
    assert_int_equal(load(&d, "model:\n  devices:\n    - 0\n    - 0\n    - 3\n", err, sizeof err), 0);
    assert_int_equal(memcmp(&c.devices, &d.devices, sizeof c.devices), 0);
    const char *which = NULL;
    cfg_defaults(&d);
    assert_int_equal(cfg_restart_keys_equal(&c, &d, &which), 0); /* restart-only */
    assert_string_equal(which, "model.devices");
    assert_int_equal(cfg_set(&d, "model.devices", "1,2", err, sizeof err), 0);
    assert_true(d.devices.n == 2 && d.devices.v[0] == 1 && d.devices.v[1] == 2);
    assert_int_equal(cfg_set(&d, "model.devices", "[0, 0, 3]", err, sizeof err), 0);
    assert_int_equal(memcmp(&c.devices, &d.devices, sizeof c.devices), 0);
    assert_int_equal(cfg_set(&d, "model.devices", "auto", err, sizeof err), 0);
    assert_int_equal(d.devices.n, 0);
    assert_int_equal(cfg_set(&d, "model.devices", "1,,2", err, sizeof err), -1);
    expect_err("model:\n  devices: []\n", "t.yaml:2:12: model.devices: an empty list (write auto for every device)");
    expect_err("model:\n  devices: [0, -1]\n", "t.yaml:2:16: model.devices: -1 is out of range [0, 63]");
    expect_err("model:\n  devices: [0, \"1\"]\n", "t.yaml:2:16: model.devices: each entry must be an integer");
    expect_err("model:\n  devices: [[0]]\n", "t.yaml:2:13: model.devices: each entry must be an integer");
    expect_err("model:\n  devices: gpu\n", "t.yaml:2:12: model.devices: expected auto or a list of integers, got \"gpu\"");
    expect_err("model:\n  device: 0\n", "t.yaml:2:3: model.device: unknown key");
}

static void test_syntax_errors(void **st)
{
    (void)st;
    cfg c;
    char err[512];
    assert_int_equal(load(&c, "server:\n  port: [80\n", err, sizeof err), -1);
    assert_non_null(strstr(err, "t.yaml:3:1: "));
    assert_int_equal(load(&c, "server:\n\tport: 80\n", err, sizeof err), -1);
    assert_non_null(strstr(err, "t.yaml:2:"));
    assert_int_equal(load(&c, "server:\n  port: 80\n---\nlog:\n  level: info\n", err, sizeof err), -1);
    assert_string_equal(err, "t.yaml:4:1: only one YAML document is allowed");
    /* A failed load leaves the config untouched. */
    cfg_defaults(&c);
    assert_int_equal(cfg_load_mem(&c, "t.yaml", "server:\n  port: 9\n  nope: 1\n", 24, err, sizeof err), -1);
    assert_int_equal(c.port, 8080);
    /* Long strings. */
    char big[2200] = "model:\n  path: ";
    memset(big + strlen(big), 'a', 1100);
    strcat(big, "\n");
    assert_int_equal(load(&c, big, err, sizeof err), -1);
    assert_string_equal(err, "t.yaml:2:9: model.path: longer than 1023 bytes");
}

static void test_file_errors(void **st)
{
    (void)st;
    cfg c;
    char err[512];
    cfg_defaults(&c);
    assert_int_equal(cfg_load_file(&c, "/nonexistent/rnntd.yaml", err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/rnntd.yaml: cannot open"));
}

static void test_flags_and_validate(void **st)
{
    (void)st;
    cfg c;
    char err[512];
    cfg_defaults(&c);
    assert_int_equal(cfg_set(&c, "server.port", "99999", err, sizeof err), -1);
    assert_string_equal(err, "command line: server.port: 99999 is out of range [0, 65535]");
    assert_int_equal(cfg_set(&c, "server.nope", "1", err, sizeof err), -1);
    assert_string_equal(err, "unknown key server.nope");
    assert_int_equal(cfg_set(&c, "server.listen", "::1", err, sizeof err), 0);
    assert_string_equal(c.listen, "::1");

    cfg_defaults(&c);
    c.max_json_bytes = c.max_body_bytes + 1; /* allowed: the smaller cap applies */
    assert_int_equal(cfg_validate(&c, err, sizeof err), 0);
    cfg_defaults(&c);
    c.max_body_bytes = c.max_pending_bytes + 1;
    c.max_json_bytes = 1024;
    assert_int_equal(cfg_validate(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "limits.max_pending_bytes"));
    for (const char *bad = "localhost\0" "1.2.3\0" "::g\0" "[::1\0" "\0"; *bad || bad[1]; bad += strlen(bad) + 1) {
        cfg_defaults(&c);
        assert_int_equal(cfg_set(&c, "server.listen", bad, err, sizeof err), 0);
        assert_int_equal(cfg_validate(&c, err, sizeof err), -1);
        assert_non_null(strstr(err, "server.listen"));
        if (!*bad) break;
    }
    for (const char *good = "0.0.0.0\0" "::\0" "[::1]\0" "fe80::1\0"; *good; good += strlen(good) + 1) {
        cfg_defaults(&c);
        assert_int_equal(cfg_set(&c, "server.listen", good, err, sizeof err), 0);
        assert_int_equal(cfg_validate(&c, err, sizeof err), 0);
    }
    cfg_defaults(&c);
    assert_int_equal(cfg_set(&c, "model.path", "", err, sizeof err), 0);
    assert_int_equal(cfg_validate(&c, err, sizeof err), -1);
    assert_string_equal(err, "model.path: must not be empty");
}

static void test_restart_keys(void **st)
{
    (void)st;
    cfg a, b;
    cfg_defaults(&a);
    cfg_defaults(&b);
    const char *which = NULL;
    assert_int_equal(cfg_restart_keys_equal(&a, &b, &which), 1);
    b.max_batch = 3; /* reloadable */
    assert_int_equal(cfg_restart_keys_equal(&a, &b, &which), 1);
    b.port = 1;
    assert_int_equal(cfg_restart_keys_equal(&a, &b, &which), 0);
    assert_string_equal(which, "server.port");
}

/* The apply hooks: every hook once at start, then only the hooks whose keys changed; restart-only
 * keys call none; every key names a hook in range; the batch-size keys share the engine's one cap. */
static int g_calls[CFG_APPLY_COUNT];
static long long g_seen_delay;
static void count_limits(void *owner, const cfg *c) { (void)owner; (void)c; g_calls[CFG_APPLY_LIMITS]++; }
static void count_sched(void *owner, const cfg *c) { (void)owner; g_calls[CFG_APPLY_SCHED]++; g_seen_delay = c->max_delay_us; }
static void count_log(void *owner, const cfg *c) { (void)owner; (void)c; g_calls[CFG_APPLY_LOG]++; }

static void test_apply_hooks(void **st)
{
    (void)st;
    cfg_hooks h = {{[CFG_APPLY_LIMITS] = count_limits, [CFG_APPLY_SCHED] = count_sched, [CFG_APPLY_LOG] = count_log}};
    cfg a, b;
    cfg_defaults(&a);
    b = a;
    memset(g_calls, 0, sizeof g_calls);
    assert_int_equal(cfg_apply(NULL, &a, &h, NULL), 3);
    assert_int_equal(g_calls[CFG_APPLY_LIMITS] + g_calls[CFG_APPLY_SCHED] + g_calls[CFG_APPLY_LOG], 3);
    memset(g_calls, 0, sizeof g_calls);
    assert_int_equal(cfg_apply(&a, &b, &h, NULL), 0);
    b.max_delay_us = 777;
    b.max_queue = 5;
    b.port = 1; /* restart-only: no hook */
    assert_int_equal(cfg_apply(&a, &b, &h, NULL), 1);
    assert_int_equal(g_calls[CFG_APPLY_SCHED], 1);
    assert_int_equal(g_seen_delay, 777);
    b = a;
    b.max_json_bytes = 4096;
    b.log_requests = 0;
    memset(g_calls, 0, sizeof g_calls);
    assert_int_equal(cfg_apply(&a, &b, &h, NULL), 2);
    assert_int_equal(g_calls[CFG_APPLY_LIMITS], 1);
    assert_int_equal(g_calls[CFG_APPLY_LOG], 1);
    for (const cfg_key *k = cfg_keys(); k->name; k++) assert_true(k->apply >= 0 && k->apply < CFG_APPLY_COUNT);
    assert_int_equal(cfg_find("batching.max_batch")->hi, RNNT_MAX_BATCH);
    assert_int_equal(cfg_find("streaming.max_batch")->hi, RNNT_MAX_BATCH);
    assert_int_equal(cfg_find("batching.max_batch")->apply, CFG_APPLY_ENGINE);
    assert_int_equal(cfg_find("server.port")->apply, CFG_APPLY_RESTART);
}

int main(int argc, char **argv)
{
    g_shipped = argc > 1 ? argv[1] : "conf/rnntd.yaml";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_valid), cmocka_unit_test(test_shipped_file),
        cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_good_values),
        cmocka_unit_test(test_bad_keys),       cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_syntax_errors),  cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_flags_and_validate), cmocka_unit_test(test_restart_keys),
        cmocka_unit_test(test_apply_hooks),    cmocka_unit_test(test_device_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
